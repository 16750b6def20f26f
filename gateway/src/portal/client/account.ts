/** `/account`: identity, session expiry, and deleting the account (type the e-mail to confirm). */
import { api, byId, date, say } from "./api.js";
import { identity } from "./layout.js";

const identityLine = byId("identity");
const expiry = byId("expiry");
const form = byId<HTMLFormElement>("delete-form");
const confirmInput = byId<HTMLInputElement>("delete-confirm");
const confirmError = byId("delete-confirm-error");
const message = byId("delete-message");
const submit = byId<HTMLButtonElement>("delete-submit");

void identity.then((me) => {
  if (!me) {
    identityLine.textContent = "Your account could not be loaded.";
    return;
  }
  identityLine.textContent = `Signed in as ${me.email ?? me.identityUserId}`;
  expiry.textContent = `This browser session lasts until ${new Date(me.expiresAt).toLocaleString()}.`;
  if (me.deletion) {
    form.hidden = true;
    byId("delete-scheduled").hidden = false;
    byId("delete-scheduled-date").textContent = date(me.deletion.purgeAt);
    return;
  }
  const expected = (me.email ?? me.identityUserId).toLowerCase();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (confirmInput.value.trim().toLowerCase() !== expected) {
      confirmError.textContent = "Type your e-mail address exactly as shown above to confirm.";
      confirmInput.setAttribute("aria-invalid", "true");
      confirmInput.focus();
      return;
    }
    confirmError.textContent = "";
    confirmInput.removeAttribute("aria-invalid");
    submit.disabled = true;
    const res = await api<{ purgeAt: string }>("DELETE", "/account/delete");
    if (!res.ok) {
      submit.disabled = false;
      say(message, res.failure.message, "error");
      return;
    }
    // Reload so every part of the page (and the banner) shows the grace period.
    window.location.reload();
  });
});
