/** Runs on every signed-in page: the deletion-grace banner, the signed-in e-mail, and copy buttons. */
import { api, byId, date } from "./api.js";

export interface Identity {
  identityUserId: string;
  email: string | null;
  expiresAt: string;
  authMethod: "bearer" | "cookie";
  deletion: { requestedAt: string; purgeAt: string } | null;
}

async function loadIdentity(): Promise<Identity | null> {
  const res = await api<Identity>("GET", "/session");
  if (!res.ok) return null;
  const me = res.body;
  const who = document.getElementById("nav-user");
  if (who) who.textContent = me.email ?? me.identityUserId;
  if (me.deletion) {
    const banner = byId("grace-banner");
    byId("grace-date").textContent = date(me.deletion.purgeAt);
    banner.hidden = false;
  }
  return me;
}

export const identity: Promise<Identity | null> = loadIdentity();

async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

// One listener for every button[data-copy] (also those a page adds later): copies the target's text.
document.addEventListener("click", (event) => {
  const button = (event.target as Element | null)?.closest<HTMLButtonElement>("button[data-copy]");
  if (!button) return;
  const target = document.getElementById(button.dataset.copy ?? "");
  if (!target) return;
  const text = (
    target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement
      ? target.value
      : (target.textContent ?? "")
  ).trim();
  const label = button.textContent;
  void copyText(text).then((copied) => {
    if (!copied && (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement))
      target.select();
    button.textContent = copied ? "Copied" : "Press Ctrl+C";
    setTimeout(() => (button.textContent = label), 2000);
  });
});
