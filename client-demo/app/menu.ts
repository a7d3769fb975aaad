import { h, ICONS, icon } from './dom.js';

/**
 * The page's action menus (a row's, the open conversation's): at most one is open, named by a
 * key (`row:<conv>`, `pane:<conv>`) so it stays open across repaints, which rebuild the DOM. A
 * menu button in the ARIA pattern: the trigger says it has a menu and whether it is open, the
 * items are menu items, arrows move between them, Escape closes and gives the focus back.
 */

export interface MenuItem {
  action: string;
  label: string;
  danger?: boolean;
  /** One choice of a radio group (the notification level): shown checked or not, its value in `data-value`. */
  choice?: { value: string; checked: boolean };
  /** A heading shown above this item (the radio group's name). */
  heading?: string;
}

export class Menus {
  private openKey: string | null = null;
  /** Where the focus goes after the next paint (the DOM is rebuilt). */
  private focusNext: string | null = null;

  constructor(private readonly repaint: () => void) {}

  isOpen(key: string): boolean {
    return this.openKey === key;
  }

  toggle(key: string): void {
    const opening = this.openKey !== key;
    this.openKey = opening ? key : null;
    this.focusNext = opening ? `item:${key}:0` : `menu:${key}`;
    this.repaint();
  }

  /** Closes the open menu; true if there was one. */
  close(giveFocusBack: boolean): boolean {
    if (this.openKey === null) return false;
    if (giveFocusBack) this.focusNext = `menu:${this.openKey}`;
    this.openKey = null;
    this.repaint();
    return true;
  }

  /** The trigger and the menu for `key`: `label` names what the menu acts on. */
  render(key: string, conv: string, label: string, items: MenuItem[]): [HTMLElement, HTMLElement] {
    const open = this.isOpen(key);
    const id = `menu-${key.replace(/[^A-Za-z0-9_-]/g, (c) => `_${c.charCodeAt(0)}`)}`;
    const trigger = h(
      'button',
      {
        class: `menu-btn${open ? ' is-open' : ''}`,
        type: 'button',
        'data-action': 'menu',
        'data-menu': key,
        'data-conv': conv,
        'data-focus': `menu:${key}`,
        'aria-haspopup': 'menu',
        'aria-expanded': String(open),
        'aria-controls': id,
        'aria-label': `More actions for ${label}`,
      },
      icon(ICONS.chevron),
    );
    const menu = h(
      'div',
      { class: 'menu', role: 'menu', id, 'aria-label': `Actions for ${label}`, hidden: !open },
      ...items.flatMap((item, i) => [
        item.heading ? h('div', { class: 'menu-heading', role: 'presentation' }, item.heading) : null,
        h(
          'button',
          {
            class: `menu-item${item.danger ? ' danger' : ''}${item.choice ? ' choice' : ''}`,
            type: 'button',
            role: item.choice ? 'menuitemradio' : 'menuitem',
            'aria-checked': item.choice ? String(item.choice.checked) : undefined,
            tabindex: '-1',
            'data-action': item.action,
            'data-value': item.choice?.value,
            'data-conv': conv,
            'data-focus': `item:${key}:${i}`,
          },
          item.label,
        ),
      ]),
    );
    return [trigger, menu];
  }

  /** After a paint: the focus where it belongs, an open menu turned upwards if it would leave the screen. */
  settle(previousFocus: string | null): void {
    const target = this.focusNext ?? previousFocus;
    this.focusNext = null;
    const el = target ? document.querySelector<HTMLElement>(`[data-focus="${CSS.escape(target)}"]`) : null;
    // A row's trigger shows only while the row has the focus (or the pointer): it must show to take it.
    el?.closest('.conv')?.classList.add('has-focus');
    el?.focus();
    for (const menu of document.querySelectorAll<HTMLElement>('.menu:not([hidden])')) {
      menu.classList.remove('up');
      if (menu.getBoundingClientRect().bottom > window.innerHeight - 8) menu.classList.add('up');
    }
  }

  /** Arrow keys inside a menu move between its items. */
  onKey(event: KeyboardEvent): void {
    const item = (event.target as HTMLElement).closest<HTMLElement>(MENU_ITEMS);
    if (!item || (event.key !== 'ArrowDown' && event.key !== 'ArrowUp')) return;
    const items = [...(item.parentElement?.querySelectorAll<HTMLElement>(MENU_ITEMS) ?? [])];
    const i = items.indexOf(item) + (event.key === 'ArrowDown' ? 1 : -1);
    items[(i + items.length) % items.length]?.focus();
    event.preventDefault();
  }
}

/** A menu's items: plain actions and the choices of a radio group. */
const MENU_ITEMS = '[role="menuitem"], [role="menuitemradio"]';

/** The focus key of what has the focus now, to put it back after a repaint. */
export const focusedKey = (): string | null => (document.activeElement as HTMLElement | null)?.dataset?.focus ?? null;
