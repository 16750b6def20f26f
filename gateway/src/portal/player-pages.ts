/**
 * The signed-in pages: one layout (navigation, the deletion-grace banner) around server-rendered markup that
 * each page's script (client/*.ts, compiled to /portal/js/) fills from /api/v1.
 */

import { documentHead, escapeHtml } from "./portal-pages";

const NAV = [
  { href: "/", label: "Play" },
  { href: "/devices", label: "Devices" },
  { href: "/billing", label: "Billing" },
  { href: "/settings", label: "Settings" },
  { href: "/settings/tokens", label: "Tokens" },
  { href: "/account", label: "Account" },
];

function appLayout(path: string, title: string, body: string, script: string): string {
  const nav = NAV.map(
    (item) =>
      `<li><a href="${item.href}"${item.href === path ? ' aria-current="page"' : ""}>${item.label}</a></li>`,
  ).join("");
  return `${documentHead(title, `<script type="module" src="/portal/js/${script}"></script>`)}
<body class="app">
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/">Cloud Gaming</a>
<nav aria-label="Main"><ul>${nav}</ul></nav>
<form class="signout" action="/logout" method="post"><span id="nav-user" class="who"></span><button id="signout" type="submit" class="secondary">Sign out</button></form>
</header>
<div id="grace-banner" class="banner warning page-banner" role="status" hidden>
Your account is scheduled for deletion and will be purged on <strong id="grace-date"></strong>. Until then you cannot start sessions or top up.
</div>
<main id="main" class="page">
<h1>${escapeHtml(title)}</h1>
${body}
</main>
</body>
</html>
`;
}

export function homePage(): string {
  return appLayout(
    "/",
    "Play",
    `<section class="panel stats" aria-labelledby="wallet-title">
<h2 id="wallet-title">Wallet</h2>
<dl class="facts">
<div><dt>Balance</dt><dd id="balance">…</dd></div>
<div><dt>Play it buys</dt><dd id="minutes">…</dd></div>
<div><dt>Price</dt><dd id="rate">…</dd></div>
</dl>
<p><a href="/billing">Top up</a></p>
</section>
<section class="panel" aria-labelledby="region-title">
<h2 id="region-title">Region</h2>
<p class="muted">The round trip from this browser to each region, measured now: the lower, the more responsive play feels.</p>
<div class="table-wrap">
<table id="regions-table" hidden>
<thead><tr><th scope="col">Region</th><th scope="col" class="num">Round trip</th><th scope="col">Capacity</th></tr></thead>
<tbody id="regions-body"></tbody>
</table>
</div>
<p id="regions-state" class="muted" aria-live="polite">Measuring…</p>
<div class="region-choice">
<div><label for="region-choice">Start sessions in</label>
<select id="region-choice" disabled><option value="auto">Nearest (auto)</option></select></div>
<button id="regions-measure" type="button" class="secondary" disabled>Measure again</button>
</div>
</section>
<section class="panel" aria-labelledby="session-title">
<h2 id="session-title">Your session</h2>
<dl class="facts">
<div><dt>State</dt><dd id="session-state" class="state">…</dd></div>
<div><dt>Region</dt><dd id="session-region">—</dd></div>
<div><dt>Ready</dt><dd id="session-ready">—</dd></div>
<div><dt>Started at</dt><dd id="session-started">—</dd></div>
<div><dt>Elapsed</dt><dd id="session-elapsed">—</dd></div>
<div><dt>Cost so far</dt><dd id="session-cost">—</dd></div>
</dl>
<progress id="session-progress" max="3" value="0" aria-labelledby="session-progress-text" hidden></progress>
<p id="session-progress-text" class="progress-text" aria-live="polite"></p>
<div class="actions">
<button id="start" type="button" disabled>Start</button>
<button id="stop" type="button" class="secondary" disabled hidden>Stop</button>
</div>
<p id="session-message" class="message" role="alert"></p>
<div class="actions"><button id="wait-in-line" type="button" class="secondary" hidden>Wait in line</button></div>
<div id="session-warning" class="banner warning" role="alert" hidden>
<p><span id="session-warning-text"></span> <span id="session-warning-left" class="muted"></span></p>
<div class="actions">
<button id="keep-playing" type="button">Keep playing</button>
<a id="warning-topup" href="/billing" hidden>Top up</a>
<a id="warning-limits" href="/billing#limits" hidden>Raise your limit</a>
</div>
</div>
<div id="play" class="play" hidden>
<section aria-labelledby="pin-title">
<h3 id="pin-title">Pairing PIN</h3>
<p>Enter it in your streaming client.</p>
<p class="pin-line"><output id="pin" class="pin" aria-live="polite">····</output> <span id="pin-countdown" class="muted"></span></p>
<button id="new-pin" type="button" class="secondary">New PIN</button>
</section>
<section aria-labelledby="connect-title">
<h3 id="connect-title">Connect</h3>
<dl class="facts">
<div><dt>Private IP</dt><dd id="connect-ip" class="mono">—</dd></div>
<div><dt>Port</dt><dd id="connect-port" class="mono">—</dd></div>
</dl>
<p>Join the private network with a one-time key, then connect your streaming client to the address above.</p>
<button id="vpn-create" type="button" class="secondary">Create private-network key</button>
<div id="vpn-box" hidden>
<label for="vpn-key">Private-network key</label>
<div class="copy-row"><input id="vpn-key" class="mono" readonly><button type="button" data-copy="vpn-key">Copy</button></div>
<p id="vpn-expiry" class="muted"></p>
</div>
</section>
</div>
</section>`,
    "home.js",
  );
}

export function billingPage(bounds: { min: number; max: number }): string {
  const presets = [500, 1000, 2000, 5000].filter((a) => a >= bounds.min && a <= bounds.max);
  if (presets.length === 0) presets.push(bounds.min);
  const checked = presets.includes(2000) ? 2000 : presets[0];
  const radios = presets
    .map(
      (amount) =>
        `<label class="choice"><input type="radio" name="preset" value="${amount}"${amount === checked ? " checked" : ""}> <span data-preset-label="${amount}">${(amount / 100).toFixed(2)}</span></label>`,
    )
    .join("");
  return appLayout(
    "/billing",
    "Billing",
    `<section class="panel stats" aria-labelledby="wallet-title">
<h2 id="wallet-title">Balance</h2>
<p class="big" id="balance">…</p>
<p id="minutes" class="muted"></p>
<p id="topup-message" class="message" role="status" aria-live="polite"></p>
</section>
<section class="panel" aria-labelledby="topup-title">
<h2 id="topup-title">Top up</h2>
<form id="topup-form" data-min="${bounds.min}" data-max="${bounds.max}" novalidate>
<fieldset>
<legend>Amount</legend>
<div class="choices">${radios}
<label class="choice"><input type="radio" name="preset" value="custom"> Other amount</label></div>
</fieldset>
<label for="topup-custom">Other amount (${(bounds.min / 100).toFixed(2)} to ${(bounds.max / 100).toFixed(2)})</label>
<input id="topup-custom" type="number" min="${(bounds.min / 100).toFixed(2)}" max="${(bounds.max / 100).toFixed(2)}" step="0.01" inputmode="decimal" disabled aria-describedby="topup-custom-error">
<p id="topup-custom-error" class="field-error" aria-live="polite"></p>
<button id="topup-submit" type="submit">Continue to payment</button>
<p class="muted">You pay on the payment provider's checkout page and come back here. The balance updates once the payment is confirmed.</p>
</form>
</section>
<section class="panel" id="auto-recharge" aria-labelledby="recharge-title">
<h2 id="recharge-title">Auto-recharge</h2>
<p class="muted">When play or storage takes your balance under a threshold, your saved card is charged once to bring it back up, never more than your monthly limit per calendar month (UTC). The credit arrives once the payment is confirmed.</p>
<dl class="facts">
<div><dt>Card</dt><dd id="card">…</dd></div>
<div><dt>Auto-recharge</dt><dd id="recharge-status">…</dd></div>
<div><dt>Recharged this month</dt><dd id="recharge-month">…</dd></div>
<div><dt>Last recharge</dt><dd id="recharge-last">—</dd></div>
</dl>
<p id="recharge-notice" class="banner warning" role="status" hidden></p>
<div class="actions">
<button id="card-save" type="button" class="secondary">Save a card</button>
<button id="card-remove" type="button" class="secondary" hidden>Remove card</button>
</div>
<form id="recharge-form" novalidate>
<div class="field checkbox"><input id="recharge-enabled" type="checkbox"><label for="recharge-enabled">Recharge automatically</label></div>
<label for="recharge-threshold">When the balance falls under</label>
<input id="recharge-threshold" type="number" min="0.01" step="0.01" inputmode="decimal">
<label for="recharge-to">Recharge it to</label>
<input id="recharge-to" type="number" min="0.01" step="0.01" inputmode="decimal">
<label for="recharge-limit">Monthly recharge limit</label>
<input id="recharge-limit" type="number" min="0.01" step="0.01" inputmode="decimal">
<div class="actions"><button id="recharge-save" type="submit">Save auto-recharge</button></div>
<p id="recharge-message" class="message" role="status" aria-live="polite"></p>
</form>
</section>
<section class="panel" id="limits" aria-labelledby="limits-title">
<h2 id="limits-title">Spending limits</h2>
<p class="muted">Play and storage charges per day and per calendar month, in UTC. A running session is warned, then stopped at a limit, and a new one cannot start once a limit leaves less than 15 minutes of play. Leave a field empty for no limit.</p>
<dl class="facts">
<div><dt>Spent today</dt><dd id="spent-today">…</dd></div>
<div><dt>Spent this month</dt><dd id="spent-month">…</dd></div>
</dl>
<form id="limits-form" novalidate>
<label for="limit-daily">Daily limit</label>
<input id="limit-daily" type="number" min="0.01" step="0.01" inputmode="decimal" placeholder="No limit">
<label for="limit-monthly">Monthly limit</label>
<input id="limit-monthly" type="number" min="0.01" step="0.01" inputmode="decimal" placeholder="No limit">
<div class="actions"><button id="limits-save" type="submit">Save limits</button></div>
<p id="limits-message" class="message" role="status" aria-live="polite"></p>
</form>
</section>
<section class="panel" aria-labelledby="storage-title">
<h2 id="storage-title">Storage</h2>
<dl class="facts">
<div><dt>Tier</dt><dd id="storage-tier">…</dd></div>
<div><dt>Size</dt><dd id="storage-size">…</dd></div>
<div><dt>Price</dt><dd id="storage-price">…</dd></div>
<div><dt>Billing period</dt><dd id="storage-period">…</dd></div>
<div><dt>This period</dt><dd id="storage-status">…</dd></div>
</dl>
</section>
<section class="panel" aria-labelledby="ledger-title">
<h2 id="ledger-title">History</h2>
<p id="ledger-state" class="muted" aria-live="polite">Loading…</p>
<div class="table-wrap">
<table id="ledger-table" hidden>
<thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Balance</th></tr></thead>
<tbody id="ledger-body"></tbody>
</table>
</div>
<button id="ledger-more" type="button" class="secondary" hidden>Show older</button>
</section>`,
    "billing.js",
  );
}

export function devicesPage(): string {
  return appLayout(
    "/devices",
    "Devices",
    `<section class="panel" aria-labelledby="devices-title">
<h2 id="devices-title">Paired streaming devices</h2>
<p>Devices you paired stay paired with your machine from one session to the next. Remove one you no longer use:
it is unpaired at once while a session runs, otherwise when your next session starts.</p>
<p id="devices-state" class="muted" aria-live="polite">Loading…</p>
<div class="table-wrap">
<table id="devices-table" hidden>
<thead><tr><th scope="col">Device</th><th scope="col">Paired</th><th scope="col">Last used</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody id="devices-body"></tbody>
</table>
</div>
<p id="devices-message" class="message" role="alert"></p>
</section>`,
    "devices.js",
  );
}

export function settingsPage(fields: string): string {
  return appLayout(
    "/settings",
    "Settings",
    `<section class="panel" aria-labelledby="prefs-title">
<h2 id="prefs-title">Streaming preferences</h2>
<form id="settings-form" novalidate>
${fields}
<button id="settings-save" type="submit" disabled>Save</button>
<p id="settings-message" class="message" role="status" aria-live="polite"></p>
</form>
</section>
<p><a href="/settings/tokens">API tokens for scripts and the CLI</a></p>`,
    "settings.js",
  );
}

export function tokensPage(token: string, expiresAt: Date, baseUrl: string): string {
  return appLayout(
    "/settings/tokens",
    "API token",
    `<section class="panel" aria-labelledby="token-title">
<h2 id="token-title">Your current access token</h2>
<p>Scripts and the <code>cgs</code> CLI can use it as a bearer token. It is the same credential as this browser session: keep it secret. It expires <time id="token-expiry" datetime="${expiresAt.toISOString()}">${escapeHtml(expiresAt.toISOString())}</time> <span id="token-left" class="muted"></span>.</p>
<label for="token">Access token</label>
<textarea id="token" class="mono token" rows="5" readonly spellcheck="false">${escapeHtml(token)}</textarea>
<button type="button" data-copy="token">Copy token</button>
</section>
<section class="panel" aria-labelledby="cli-title">
<h2 id="cli-title">Use it</h2>
<p>Point the CLI and SDKs at this portal:</p>
<div class="copy-row"><pre id="cli-base" class="mono">export SERVICE_BASE_URL=${escapeHtml(baseUrl)}</pre><button type="button" data-copy="cli-base">Copy</button></div>
<p>Sign the CLI in with the token (it reads it from standard input: paste it, then press Ctrl+D):</p>
<div class="copy-row"><pre id="cli-login" class="mono">cgs login --with-token</pre><button type="button" data-copy="cli-login">Copy</button></div>
<p>Or call the API directly:</p>
<div class="copy-row"><pre id="cli-curl" class="mono">curl -H "Authorization: Bearer $TOKEN" ${escapeHtml(baseUrl)}/api/v1/credits/me</pre><button type="button" data-copy="cli-curl">Copy</button></div>
<p class="muted">A copied token stops working when it expires. For long-running scripts sign in with <code>cgs login</code>, which refreshes by itself.</p>
</section>`,
    "tokens.js",
  );
}

export function tokensElsewherePage(): string {
  return appLayout(
    "/settings/tokens",
    "API token",
    `<p>For your safety the token is only shown when this page is opened from the portal itself.</p>
<p><a href="/settings/tokens">Show my token</a></p>`,
    "layout.js",
  );
}

export function accountPage(): string {
  return appLayout(
    "/account",
    "Your account",
    `<section class="panel" aria-labelledby="who-title">
<h2 id="who-title">Identity</h2>
<p id="identity" role="status">Loading…</p>
<p id="expiry"></p>
<form action="/logout" method="post"><button id="account-signout" type="submit" class="secondary">Sign out</button></form>
</section>
<section class="panel danger" aria-labelledby="delete-title">
<h2 id="delete-title">Delete account</h2>
<p>Deleting schedules the account, its wallet and its storage volume for removal after a 30-day grace period. Sessions and top-ups stop at once.</p>
<form id="delete-form" novalidate>
<label for="delete-confirm">Type your e-mail address to confirm</label>
<input id="delete-confirm" type="email" autocomplete="off" aria-describedby="delete-confirm-error">
<p id="delete-confirm-error" class="field-error" aria-live="polite"></p>
<button id="delete-submit" type="submit" class="destructive">Delete my account</button>
<p id="delete-message" class="message" role="alert"></p>
</form>
<p id="delete-scheduled" hidden>Deletion is scheduled. Everything is purged on <strong id="delete-scheduled-date"></strong>.</p>
</section>`,
    "account.js",
  );
}
