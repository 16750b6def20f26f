import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/**
 * The portal's stylesheet and the sign-in pages' scripts, served as same-origin files so the CSP needs no
 * 'unsafe-inline'. The signed-in pages' scripts are typed modules in client/, compiled by the workspace build.
 */

export const MIN_PASSWORD_LENGTH = 10;
export const MAX_PASSWORD_LENGTH = 256;

const stylesheet = `
:root {
  color-scheme: light dark;
  --bg: #f4f5f7; --fg: #1d1d1f; --panel: #fff; --muted: #595960; --border: #c7c7cc;
  --accent: #3155d8; --accent-fg: #fff; --ok-bg: #e4f6e8; --ok: #135c2a; --err-bg: #fdecec; --err: #a4161a;
  --info-bg: #e8eefc; --warn-bg: #fff4d6; --warn: #6b4a00; --code-bg: #eef0f4;
  font-family: system-ui, sans-serif; color: var(--fg); background: var(--bg);
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #141518; --fg: #ececf0; --panel: #1f2126; --muted: #a9abb3; --border: #4a4d55;
    --accent: #7d9bff; --accent-fg: #0b0d12; --ok-bg: #15321f; --ok: #8fe0a6; --err-bg: #3a1618; --err: #ff9b9e;
    --info-bg: #1c2647; --warn-bg: #3a2f10; --warn: #ffd877; --code-bg: #2a2d34;
  }
}
body { margin: 0; display: flex; justify-content: center; padding: 4rem 1rem; }
.card { background: var(--panel); border-radius: 12px; padding: 2rem; width: 100%; max-width: 26rem; box-shadow: 0 2px 12px rgba(0,0,0,.08); }
h1 { font-size: 1.4rem; margin-top: 0; }
h2 { font-size: 1.1rem; margin: 0 0 .75rem; }
h3 { font-size: 1rem; margin: 1rem 0 .25rem; }
a { color: var(--accent); }
label { display: block; margin: 1rem 0 .3rem; font-weight: 600; }
input, select, textarea { width: 100%; box-sizing: border-box; padding: .6rem; font-size: 1rem; border: 1px solid var(--border); border-radius: 8px; background: var(--panel); color: var(--fg); }
input[type=radio], input[type=checkbox] { width: auto; margin: 0 .4rem 0 0; }
button, .button { display: inline-block; margin-top: 1rem; padding: .6rem 1.2rem; font-size: 1rem; border: 0; border-radius: 8px; background: var(--accent); color: var(--accent-fg); text-decoration: none; cursor: pointer; }
button.secondary { background: transparent; color: var(--accent); border: 1px solid var(--accent); }
button.destructive { background: var(--err); color: var(--panel); }
button[disabled] { opacity: .6; cursor: default; }
[aria-invalid=true] { border-color: var(--err); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.banner { padding: .75rem 1rem; border-radius: 8px; }
.banner.success { background: var(--ok-bg); color: var(--ok); }
.banner.error, .message.error, .field-error { color: var(--err); }
.banner.error { background: var(--err-bg); }
.banner.info { background: var(--info-bg); }
.banner.warning { background: var(--warn-bg); color: var(--warn); }
.message { min-height: 1.2rem; }
.app .message:empty { min-height: 0; margin: 0; }
.message.success { color: var(--ok); }
.field-error { margin: .25rem 0 0; min-height: 1rem; font-size: .9rem; }
.hint, .muted { color: var(--muted); font-size: .9rem; }
.hint { margin: .25rem 0 0; }
.hint:empty { display: none; }
.mono, code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
code { background: var(--code-bg); padding: 0 .25rem; border-radius: 4px; }
body.app { display: block; padding: 0; }
.skip { position: absolute; left: -999px; }
.skip:focus { left: 1rem; top: 1rem; background: var(--panel); padding: .5rem; z-index: 1; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
.top { display: flex; flex-wrap: wrap; align-items: center; gap: .5rem 1.5rem; padding: .75rem 1.25rem; background: var(--panel); border-bottom: 1px solid var(--border); }
.brand { font-weight: 700; color: var(--fg); text-decoration: none; }
.top nav ul { display: flex; flex-wrap: wrap; gap: .25rem .75rem; list-style: none; margin: 0; padding: 0; }
.top nav a { display: inline-block; padding: .35rem .25rem; text-decoration: none; }
.top nav a[aria-current=page] { font-weight: 700; border-bottom: 2px solid var(--accent); }
.signout { margin-left: auto; display: flex; align-items: center; gap: .5rem; }
.signout button { margin: 0; padding: .35rem .8rem; }
.who { color: var(--muted); font-size: .9rem; overflow-wrap: anywhere; }
.page-banner { margin: 1rem auto 0; max-width: 56rem; border-radius: 8px; }
.page { max-width: 56rem; margin: 0 auto; padding: 1.5rem 1.25rem 3rem; }
.panel { background: var(--panel); border-radius: 12px; padding: 1.25rem; margin-bottom: 1.25rem; box-shadow: 0 2px 12px rgba(0,0,0,.08); }
.panel.danger { border: 1px solid var(--err); }
.facts { display: grid; grid-template-columns: repeat(auto-fit, minmax(8rem, 1fr)); gap: .75rem 1rem; margin: 0; }
.facts dt { color: var(--muted); font-size: .85rem; }
.facts dd { margin: .15rem 0 0; font-weight: 600; overflow-wrap: anywhere; }
.big { font-size: 2rem; font-weight: 700; margin: 0; }
.state[data-state=running] { color: var(--ok); }
.state[data-state=failed] { color: var(--err); }
progress { width: 100%; margin-top: 1rem; accent-color: var(--accent); }
.progress-text { margin: .25rem 0 0; }
progress[hidden] + .progress-text { margin-top: 1rem; }
.actions { display: flex; gap: .75rem; flex-wrap: wrap; }
.play { display: grid; grid-template-columns: repeat(auto-fit, minmax(16rem, 1fr)); gap: 1rem 2rem; border-top: 1px solid var(--border); margin-top: 1rem; }
.pin { font: 700 2.4rem ui-monospace, monospace; letter-spacing: .3rem; }
.pin.expired { text-decoration: line-through; color: var(--muted); }
.pin-line { margin: .25rem 0; }
.copy-row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: stretch; }
.copy-row > input, .copy-row > pre { flex: 1 1 14rem; min-width: 0; }
.copy-row button { margin-top: 0; }
pre { margin: 0; padding: .6rem; background: var(--code-bg); border-radius: 8px; overflow-x: auto; white-space: pre-wrap; overflow-wrap: anywhere; }
.token { word-break: break-all; resize: vertical; }
fieldset { border: 0; padding: 0; margin: 0; }
legend { font-weight: 600; margin-bottom: .4rem; }
.choices { display: flex; flex-wrap: wrap; gap: .5rem; }
.choice { display: inline-flex; align-items: center; margin: 0; padding: .5rem .8rem; border: 1px solid var(--border); border-radius: 8px; font-weight: 500; }
.field.checkbox { display: flex; flex-wrap: wrap; align-items: center; margin-top: 1rem; }
.field.checkbox label { margin: 0; flex: 1; }
.panel form input:not([type=radio]):not([type=checkbox]), .panel form select { max-width: 30rem; }
.field.checkbox .hint, .field.checkbox .field-error { flex-basis: 100%; }
.table-wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-size: .95rem; }
th, td { text-align: left; padding: .45rem .5rem; border-bottom: 1px solid var(--border); }
.num { text-align: right; white-space: nowrap; }
.region-choice { display: flex; flex-wrap: wrap; align-items: flex-end; gap: 0 1rem; }
.region-choice > div { flex: 1 1 16rem; max-width: 30rem; }
.badge { display: inline-block; margin-left: .4rem; padding: 0 .45rem; border-radius: 999px; font-size: .8rem; font-weight: 600; background: var(--ok-bg); color: var(--ok); }
[hidden] { display: none !important; }
@media (max-width: 600px) {
  .top { padding: .6rem .75rem; gap: .25rem .75rem; }
  .top nav { order: 3; flex-basis: 100%; overflow-x: auto; }
  .top nav ul { flex-wrap: wrap; gap: .1rem .6rem; }
  .top nav a { white-space: nowrap; padding: .35rem .15rem; font-size: .95rem; }
  .who { display: none; }
  .page { padding: 1rem .75rem 2rem; }
  .panel { padding: 1rem; }
  .page-banner { margin: .75rem; }
}
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

export const portalAssets: Record<string, { type: string; body: string }> = {
  "portal.css": { type: "text/css; charset=utf-8", body: stylesheet },
  "forgot-password.js": { type: "text/javascript; charset=utf-8", body: forgotPasswordScript },
  "reset-password.js": { type: "text/javascript; charset=utf-8", body: resetPasswordScript },
};

/** Where the workspace build puts client/*.ts, seen from src/portal (ts-jest) and from dist/portal alike. */
export const CLIENT_SCRIPTS_DIR = path.resolve(__dirname, "../../dist/portal/client");

/** The compiled client modules by file name, read once; empty when the workspace has not been built. */
export function loadClientScripts(dir = CLIENT_SCRIPTS_DIR): Map<string, string> {
  if (!existsSync(dir)) return new Map();
  return new Map(
    readdirSync(dir)
      .filter((name) => name.endsWith(".js"))
      .map((name) => [name, readFileSync(path.join(dir, name), "utf8")]),
  );
}
