import type { Browser, BrowserContext, Page } from "playwright-core";
import { createTestUser, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import type { LaunchedPlatform } from "../../test/platform/launch-platform";
import { describeWithChromium, launchChromium } from "../../test/harnesses/portal-browser-harness";
import {
  launchPortalPlatform,
  readClipboard,
  screenshots,
  seriousViolations,
  signIn,
  simulatorFaults,
} from "../../test/harnesses/portal-platform-kit";

// A player's whole journey in real Chromium through the gateway of the running platform (npm start's launcher):
// Keycloak's sign-in page, the local checkout, the cloud simulator, metering over SQS, the deletion grace.
describeWithChromium("the portal journey browser test")("the portal, a player's whole journey", () => {
  let platform: LaunchedPlatform;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let user: TestUser;
  const pageErrors: string[] = [];
  const pollTimes: number[] = [];
  let copiedToken = "";

  beforeAll(async () => {
    platform = await launchPortalPlatform("portal-journey", 18680);
    base = platform.base;
    browser = await launchChromium();
    user = await createTestUser(uniqueEmail("journey"), { password: "Journey-pass-1" });
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: base });
    page = await context.newPage();
    page.on("console", (m) => {
      if (m.type() === "error") pageErrors.push(m.text());
    });
    page.on("pageerror", (e) => pageErrors.push(e.message));
    page.on("request", (r) => {
      if (r.url().endsWith("/api/v1/sessions/poll")) pollTimes.push(Date.now());
    });
  }, 240_000);

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    await user?.remove();
    await platform?.cleanup();
  }, 60_000);

  /** Every page a player sees: no serious or critical axe violation, and screenshots for people to look at. */
  async function inspect(name: string) {
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, name);
  }

  const text = async (selector: string) => ((await page.textContent(selector)) ?? "").trim();

  it("when a new player signs in, then the play page shows an empty balance, and a start is refused with a link to top up", async () => {
    await signIn(page, base, user);
    await page.locator("#session-state", { hasText: "No session" }).waitFor();
    expect(await text("#balance")).toMatch(/0\.00/);
    expect(await text("#minutes")).toBe("0 min");
    // Keyboard first: the first Tab reaches "Skip to content"; Start works from the keyboard.
    await page.keyboard.press("Tab");
    expect(await page.evaluate("document.activeElement && document.activeElement.textContent")).toBe(
      "Skip to content",
    );
    await page.focus("#start");
    await page.keyboard.press("Enter");
    const message = page.locator("#session-message");
    await message.filter({ hasText: "does not cover the 15 minutes" }).waitFor();
    expect(await message.locator("a").getAttribute("href")).toBe("/billing");
    await inspect("play-no-credit");
  });

  it("when the player tops up a preset on the checkout page, then /billing shows the credit once the webhook landed", async () => {
    await page.goto(`${base}/billing`);
    await page.locator("#storage-tier:not(:text('…'))").waitFor();
    // The ledger either lists entries or says it is not available yet; it never breaks the page.
    await page.locator("#ledger-state:not(:text('Loading…'))").waitFor();
    expect(await text("#ledger-state")).not.toContain("could not be loaded");
    // A custom amount outside the contract's bounds is refused next to the field, before any request.
    await page.check("input[name=preset][value=custom]");
    await page.fill("#topup-custom", "2");
    await page.click("#topup-submit");
    expect(await text("#topup-custom-error")).toMatch(/from .*5\.00 to .*500\.00/);
    await inspect("billing");

    await page.check("input[name=preset][value='2000']");
    await Promise.all([page.waitForURL(/\/local-checkout\/cs_local_/), page.click("#topup-submit")]);
    expect(await page.textContent("h1")).toContain("20.00");
    await Promise.all([page.waitForURL(`${base}/billing`), page.click("button:text('Pay')")]);
    await page.locator("#topup-message", { hasText: "has been credited" }).waitFor({ timeout: 30_000 });
    expect(await text("#balance")).not.toMatch(/^\D*0\.00$/);
    expect(await text("#storage-status")).not.toBe("…");
  });

  it("when the player starts a session, then the card shows progress, then the PIN, connect info and a key to copy; a second tab's start is refused; stop ends it", async () => {
    // A second tab open on the play page before the session starts.
    const second = await context.newPage();
    await second.goto(`${base}/`);
    await second.locator("#session-state", { hasText: "No session" }).waitFor();

    await page.goto(`${base}/`);
    await page.locator("#session-state", { hasText: "No session" }).waitFor();
    expect(await text("#minutes")).not.toBe("0 min");
    await page.click("#start");
    await page.locator("#session-state", { hasText: "Starting" }).waitFor();
    expect(await page.isVisible("#session-progress")).toBe(true);
    // The phase and its estimate, as poll's message names them.
    expect(await text("#session-progress-text")).toMatch(
      /^(Finding a machine|Starting a new machine, (about \d+ (s|min)|taking longer than usual))$/,
    );
    await screenshots(page, "play-starting");

    await second.click("#start");
    await second.locator("#session-message", { hasText: "already running" }).waitFor();
    await second.locator("#session-state", { hasText: /Starting|Running/ }).waitFor();
    await second.close();

    await page.locator("#session-ready", { hasText: "Yes" }).waitFor({ timeout: 30_000 });
    expect(await text("#session-state")).toBe("Running");
    await page.locator("#pin", { hasText: /^[0-9]{4}$/ }).waitFor();
    await page.locator("#pin-countdown", { hasText: /expires in \d+:\d\d/ }).waitFor();
    await page.locator("#connect-ip", { hasText: /^\d+\.\d+\.\d+\.\d+$/ }).waitFor();
    expect(await text("#connect-port")).toMatch(/^\d+$/);
    expect(await text("#session-started")).not.toBe("—");
    expect(await text("#session-elapsed")).toMatch(/^\d+:\d\d$/);
    expect(await text("#session-cost")).toMatch(/\d\.\d\d/);

    await page.click("#vpn-create");
    await page.locator("#vpn-box").waitFor();
    const key = await page.inputValue("#vpn-key");
    expect(key.length).toBeGreaterThan(0);
    await page.click("button[data-copy=vpn-key]");
    expect(await readClipboard(page)).toBe(key);
    await inspect("play-running");

    await page.click("#stop");
    await page.locator("#session-state", { hasText: "Stopped" }).waitFor({ timeout: 30_000 });
    expect(await page.isVisible("#play")).toBe(false);
    // The page kept to the poll budget (30 a minute): never two polls closer than 2 s.
    const gaps = pollTimes.slice(1).map((t, i) => t - pollTimes[i]!);
    expect(gaps.length).toBeGreaterThan(3);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1_900);
  }, 120_000);

  it("when the cloud region is out of capacity, then the start explains it with the time to retry, and nothing runs", async () => {
    await simulatorFaults(platform, { capacityExhausted: true });
    try {
      await page.click("#start");
      const message = page.locator("#session-message");
      await message.filter({ hasText: "is full right now" }).waitFor();
      expect(await message.textContent()).toMatch(/Try again in \d+ s, or wait in line/);
      expect(await page.isVisible("#wait-in-line")).toBe(true);
      expect(await page.isDisabled("#start")).toBe(true);
      expect(await text("#start")).toMatch(/retry in \d+ s/);
      expect(await text("#session-state")).toBe("Stopped");
    } finally {
      await simulatorFaults(platform, { capacityExhausted: false });
    }
  });

  it("when the player changes two preferences, then they are saved and still there after a reload; an out-of-bounds value is refused next to its field", async () => {
    await page.goto(`${base}/settings`);
    await page.locator("#settings-save:not([disabled])").waitFor();
    await page.fill("#pref-bitrateKbps", "150");
    await page.click("#settings-save");
    expect(await text("#pref-bitrateKbps-error")).toBe("Enter a value from 2000 to 100000.");
    expect(await page.getAttribute("#pref-bitrateKbps", "aria-invalid")).toBe("true");
    await inspect("settings");

    await page.fill("#pref-bitrateKbps", "35000");
    await page.selectOption("#pref-fps", "120");
    await page.click("#settings-save");
    await page.locator("#settings-message", { hasText: "Preferences saved" }).waitFor();
    await page.reload();
    await page.locator("#settings-save:not([disabled])").waitFor();
    expect(await page.inputValue("#pref-bitrateKbps")).toBe("35000");
    expect(await page.inputValue("#pref-fps")).toBe("120");
  });

  it("when the player copies the token from /settings/tokens, then the API accepts it as a bearer token", async () => {
    await page.goto(`${base}/settings/tokens`);
    const token = await page.inputValue("#token");
    await page.click("button[data-copy=token]");
    const copied = await readClipboard(page);
    expect(copied).toBe(token);
    copiedToken = copied;
    expect(await text("#cli-base")).toBe(`export SERVICE_BASE_URL=${base}`);
    expect(await text("#cli-login")).toBe("cgs login --with-token");
    await page.locator("#token-left", { hasText: /\d+:\d\d/ }).waitFor();
    await inspect("tokens");

    const res = await fetch(`${base}/api/v1/credits/me`, { headers: { authorization: `Bearer ${copied}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { balance: number }).balance).toBeGreaterThan(0);
  });

  it("when the player deletes the account after typing the e-mail, then every page shows the grace banner with the purge date and a start is refused", async () => {
    await page.goto(`${base}/account`);
    await page.locator("#identity", { hasText: user.email }).waitFor();
    await inspect("account");
    await page.fill("#delete-confirm", "someone-else@example.com");
    await page.click("#delete-submit");
    expect(await text("#delete-confirm-error")).toContain("Type your e-mail address");
    expect(await page.isVisible("#grace-banner")).toBe(false);

    await page.fill("#delete-confirm", user.email);
    await page.click("#delete-submit");
    await page.locator("#grace-banner").waitFor();
    const purge = new Date(Date.now() + 30 * 24 * 3600 * 1000).toLocaleDateString("en-US", {
      dateStyle: "long",
    });
    expect(await text("#grace-date")).toBe(purge);
    expect(await page.isVisible("#delete-form")).toBe(false);
    await screenshots(page, "account-grace");

    for (const path of ["/", "/billing", "/settings", "/settings/tokens"]) {
      await page.goto(`${base}${path}`);
      await page.locator("#grace-banner").waitFor();
      expect(await text("#grace-date")).toBe(purge);
    }
    await page.goto(`${base}/`);
    await page.locator("#session-state", { hasText: "Stopped" }).waitFor();
    await page.click("#start");
    await page.locator("#session-message", { hasText: "scheduled for deletion" }).waitFor();
    await inspect("play-grace");
  });

  it("when the account's poll budget is spent, then the play page says so and waits the Retry-After before polling again", async () => {
    for (let i = 0; i < 40; i++) {
      const res = await fetch(`${base}/api/v1/sessions/poll`, {
        headers: { authorization: `Bearer ${copiedToken}` },
      });
      if (res.status === 429) break;
    }
    pollTimes.length = 0;
    await page.goto(`${base}/`);
    await page
      .locator("#session-progress-text", { hasText: /Checking too often; next check in \d+ s/ })
      .waitFor();
    const wait = Number(/in (\d+) s/.exec(await text("#session-progress-text"))![1]);
    await page.waitForTimeout(Math.min(wait - 1, 5) * 1000);
    expect(pollTimes).toHaveLength(1);
  });

  it("when the journey is over, then no page logged a script error or a CSP refusal", async () => {
    // The API errors the journey provoked on purpose (402, 409, 429, 503, the ledger's 404) are logged by the browser as failed loads.
    expect(
      pageErrors.filter(
        (e) =>
          !/Failed to load resource: the server responded with a status of (402|409|429|503|404)/.test(e),
      ),
    ).toEqual([]);
  });
});
