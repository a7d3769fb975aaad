/**
 * The line under the test tools that says what the last action did. A failure is marked as one
 * (`data-kind="error"`) and cleared when the page becomes live again (connected, counts
 * confirmed): by then it is about a server that was away, and would stay on screen next to
 * counts that are fine.
 */
export class StatusLine {
  private live = false;
  private failing = false;

  constructor(private readonly el: HTMLElement) {}

  info(text: string): void {
    this.show(text, 'info');
  }

  error(text: string): void {
    this.show(text, 'error');
  }

  /** Called on every paint with whether the counts are live (connected and confirmed). */
  connection(live: boolean): void {
    if (live && !this.live && this.failing) this.show('', 'info');
    this.live = live;
  }

  private show(text: string, kind: 'info' | 'error'): void {
    this.failing = kind === 'error';
    this.el.textContent = text;
    this.el.dataset.kind = kind;
  }
}
