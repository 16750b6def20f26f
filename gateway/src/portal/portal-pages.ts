/** The portal's HTML: static markup only (no request data is echoed), scripts and styles as same-origin files. */

export const escapeHtml = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );

/** Everything up to </head>, shared by every portal page; `script` is one same-origin script tag or "". */
export function documentHead(title: string, script: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<meta name="color-scheme" content="light dark">
<title>${escapeHtml(title)} · Cloud Gaming</title>
<link rel="stylesheet" href="/portal/portal.css">
${script}
</head>`;
}

function layout(title: string, body: string, script?: string): string {
  return `${documentHead(title, script ? `<script src="/portal/${script}" defer></script>` : "")}
<body>
<main class="card">
<h1>${escapeHtml(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

export type LoginBanner = "password-updated" | "signin-failed" | "signed-out" | null;

const banners: Record<Exclude<LoginBanner, null>, { kind: string; text: string }> = {
  "password-updated": { kind: "success", text: "Password updated. Sign in with your new password." },
  "signin-failed": { kind: "error", text: "Sign-in did not complete. Please try again." },
  "signed-out": { kind: "info", text: "You are signed out." },
};

export function loginPage(banner: LoginBanner): string {
  const notice = banner
    ? `<p id="banner" class="banner ${banners[banner].kind}" role="status">${escapeHtml(banners[banner].text)}</p>`
    : "";
  return layout(
    "Sign in",
    `${notice}
<p>Sign in with your e-mail and password, or with a social account.</p>
<p><a id="signin" class="button" href="/login/start">Sign in</a></p>
<p><a id="forgot" href="/forgot-password">Forgot your password?</a></p>`,
  );
}

export function forgotPasswordPage(): string {
  return layout(
    "Forgot your password?",
    `<form id="forgot-form" action="/forgot-password" method="post" novalidate>
<label for="email">E-mail address</label>
<input id="email" name="email" type="email" autocomplete="email" maxlength="254" required>
<p id="message" class="message" role="status" aria-live="polite"></p>
<button id="submit" type="submit">Send reset link</button>
</form>
<p><a href="/login">Back to sign in</a></p>`,
    "forgot-password.js",
  );
}

export function resetPasswordPage(): string {
  return layout(
    "Choose a new password",
    `<form id="reset-form" action="/reset-password" method="post" novalidate>
<label for="password">New password (at least 10 characters)</label>
<input id="password" name="password" type="password" autocomplete="new-password" minlength="10" maxlength="256" required>
<label for="confirm">Confirm the new password</label>
<input id="confirm" name="confirm" type="password" autocomplete="new-password" minlength="10" maxlength="256" required>
<p id="message" class="message" role="alert" aria-live="assertive"></p>
<button id="submit" type="submit">Set password</button>
</form>
<p><a href="/forgot-password">Request a new link</a></p>`,
    "reset-password.js",
  );
}

export function accountPage(): string {
  return layout(
    "Your account",
    `<p id="identity" role="status">Loading…</p>
<p id="expiry"></p>
<form action="/logout" method="post"><button id="signout" type="submit">Sign out</button></form>`,
    "account.js",
  );
}
