import { byId } from './dom.js';

/**
 * The test tools, folded away behind the bar's button: a drawer over the page (full width on a
 * phone). Opening moves the focus into it; closing (its ×, the button again, Escape) gives the
 * focus back to the button.
 */
export interface Tools {
  isOpen(): boolean;
  set(open: boolean): void;
}

export function setupTools(): Tools {
  const drawer = byId('tools');
  const toggle = byId('tools-toggle');
  const set = (open: boolean): void => {
    if (drawer.hidden === !open) return;
    drawer.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    (open ? byId('tools-close') : toggle).focus();
  };
  toggle.addEventListener('click', () => set(drawer.hidden));
  byId('tools-close').addEventListener('click', () => set(false));
  document.getElementById('empty-tools')?.addEventListener('click', () => set(true));
  return { isOpen: () => !drawer.hidden, set };
}
