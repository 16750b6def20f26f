/**
 * The portal's scripts and stylesheet, served as same-origin files so the CSP needs no 'unsafe-inline'.
 * Kept as strings so the compiled gateway carries them (no build step, no files beside dist/).
 */

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;

const stylesheet = `
:root { font-family: system-ui, sans-serif; color: #1d1d1f; background: #f4f5f7; }
body { margin: 0; display: flex; justify-content: center; padding: 4rem 1rem; }
.card { background: #fff; border-radius: 12px; padding: 2rem; width: 100%; max-width: 26rem; box-shadow: 0 2px 12px rgba(0,0,0,.08); }
h1 { font-size: 1.4rem; margin-top: 0; }
label { display: block; margin: 1rem 0 .3rem; font-weight: 600; }
input { width: 100%; box-sizing: border-box; padding: .6rem; font-size: 1rem; border: 1px solid #c7c7cc; border-radius: 8px; }
button, .button { display: inline-block; margin-top: 1rem; padding: .6rem 1.2rem; font-size: 1rem; border: 0; border-radius: 8px; background: #3155d8; color: #fff; text-decoration: none; cursor: pointer; }
button[disabled] { opacity: .6; cursor: default; }
.banner { padding: .75rem 1rem; border-radius: 8px; }
.banner.success { background: #e4f6e8; color: #135c2a; }
.banner.error, .message.error { color: #a4161a; }
.banner.error { background: #fdecec; }
.banner.info { background: #e8eefc; }
.message { min-height: 1.2rem; }
.message.success { color: #135c2a; }
`;

const forgotPasswordScript = `"use strict";
(function () {
  var form = document.getElementById("forgot-form");
  var email = document.getElementById("email");
  var message = document.getElementById("message");
  var submit = document.getElementById("submit");
  function show(text, kind) { message.textContent = text; message.className = "message " + kind; }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var value = email.value.trim();
    if (!/^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$/.test(value)) { show("Enter a valid e-mail address.", "error"); return; }
    submit.disabled = true;
    fetch("/api/v1/auth/password-reset/request", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ email: value })
    }).then(function (res) {
      if (res.ok) {
        show("If an account uses this address, we sent it a link to reset the password. The link works for 1 hour.", "success");
      } else if (res.status === 429) {
        show("Too many requests. Wait a moment and try again.", "error");
      } else if (res.status === 400) {
        show("Enter a valid e-mail address.", "error");
      } else {
        show("Something went wrong. Try again later.", "error");
      }
    }).catch(function () {
      show("Network error. Try again.", "error");
    }).finally(function () { submit.disabled = false; });
  });
})();
`;

const resetPasswordScript = `"use strict";
(function () {
  var MIN = ${MIN_PASSWORD_LENGTH}, MAX = ${MAX_PASSWORD_LENGTH};
  var form = document.getElementById("reset-form");
  var password = document.getElementById("password");
  var confirm = document.getElementById("confirm");
  var message = document.getElementById("message");
  var submit = document.getElementById("submit");
  var token = new URLSearchParams(window.location.search).get("token") || "";
  function show(text) { message.textContent = text; message.className = "message error"; }
  if (!token) { show("This page needs the link from the reset e-mail."); submit.disabled = true; }
  var texts = {
    RESET_TOKEN_EXPIRED: "This link has expired. Request a new one.",
    RESET_TOKEN_INVALID: "This link is invalid or was already used. Request a new one.",
    PASSWORD_REUSED: "Choose a password different from your previous one.",
    RATE_LIMITED: "Too many attempts. Wait a moment and try again."
  };
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (password.value.length < MIN) { show("The password must be at least " + MIN + " characters."); return; }
    if (password.value.length > MAX) { show("The password must be at most " + MAX + " characters."); return; }
    if (password.value !== confirm.value) { show("The two passwords do not match."); return; }
    submit.disabled = true;
    fetch("/api/v1/auth/password-reset/complete", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token: token, password: password.value })
    }).then(function (res) {
      if (res.ok) { window.location.assign("/login?status=password-updated"); return; }
      return res.json().then(function (body) {
        show(texts[body.error] || body.message || "The password could not be changed.");
        submit.disabled = false;
      });
    }).catch(function () {
      show("Network error. Try again.");
      submit.disabled = false;
    });
  });
})();
`;

const accountScript = `"use strict";
(function () {
  var identity = document.getElementById("identity");
  var expiry = document.getElementById("expiry");
  fetch("/api/v1/session", { credentials: "same-origin" }).then(function (res) {
    if (res.status === 401) { window.location.assign("/login"); return; }
    if (!res.ok) { identity.textContent = "Your account could not be loaded."; return; }
    return res.json().then(function (me) {
      identity.textContent = "Signed in as " + (me.email || me.identityUserId);
      expiry.textContent = "This browser session lasts until " + new Date(me.expiresAt).toLocaleString() + ".";
    });
  }).catch(function () { identity.textContent = "Network error."; });
})();
`;

export const portalAssets: Record<string, { type: string; body: string }> = {
  "portal.css": { type: "text/css; charset=utf-8", body: stylesheet },
  "forgot-password.js": { type: "text/javascript; charset=utf-8", body: forgotPasswordScript },
  "reset-password.js": { type: "text/javascript; charset=utf-8", body: resetPasswordScript },
  "account.js": { type: "text/javascript; charset=utf-8", body: accountScript },
};
