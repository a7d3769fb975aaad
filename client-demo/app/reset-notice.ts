import type { RedpointClient } from '@redpoint/client';

/**
 * The notice that the server's state was reset (the SDK's `reset` event: a memory engine that
 * restarted, a Redis that lost the user's keys). The counts on screen changed without any
 * message or read, so the page says why; it stays until dismissed.
 */
export function setupResetNotice(client: RedpointClient): void {
  const box = document.getElementById('notice');
  const text = document.getElementById('notice-text');
  if (!box || !text) throw new Error('#notice missing from index.html');
  document.getElementById('notice-dismiss')?.addEventListener('click', () => {
    box.hidden = true;
  });
  client.on('reset', () => {
    text.textContent = `The server's state was reset (${new Date().toLocaleTimeString()}): counts reloaded from the server.`;
    box.hidden = false;
  });
}
