/**
 * Paints wait while a pointer is pressed. Every paint rebuilds the DOM under it: one between a
 * press and its release would replace the pressed button, and a browser that saw the press and
 * the release on two elements fires no click (a push landing mid-click lost the click).
 */
export class PressHold {
  private pressed = false;
  private held = false;
  private lapse: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly repaint: () => void) {
    document.addEventListener('pointerdown', () => this.press(), true);
    document.addEventListener('pointerup', () => this.release(), true);
    document.addEventListener('pointercancel', () => this.release(), true);
  }

  /** True while a paint must wait; the held paint runs once the pointer is up. */
  holds(): boolean {
    if (!this.pressed) return false;
    this.held = true;
    return true;
  }

  private press(): void {
    this.pressed = true;
    clearTimeout(this.lapse);
    // A release the page never hears (the pointer left the window) must not freeze it.
    this.lapse = setTimeout(() => this.end(), LONGEST_HOLD_MS);
  }

  private release(): void {
    clearTimeout(this.lapse);
    // The click comes after the pointerup, in the same task: the paint waits until it is handled.
    this.lapse = setTimeout(() => this.end(), 0);
  }

  private end(): void {
    this.pressed = false;
    if (!this.held) return;
    this.held = false;
    this.repaint();
  }
}

/** After this long a press no longer holds paints back. */
const LONGEST_HOLD_MS = 3_000;
