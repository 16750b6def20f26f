import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser } from "playwright-core";
import { ApiError, createClient, type Client, type SessionStatus } from "@cgs/sdk";
import { createTestUser, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import { waitUntil } from "@cgs/shared/testing/queue";
import { fundAccount, localSession } from "../harnesses/client-platform";
import { cgsEnv, runCgs } from "../harnesses/run-cgs";
import { describeWithChromium, launchChromium } from "../harnesses/portal-browser-harness";
import { screenshots, seriousViolations, signIn } from "../harnesses/portal-platform-kit";
import { fastJourneyEnv, launchPlatform, type LaunchedPlatform } from "./launch-platform";

// The wallet guardrails as a player meets them on `npm start` (ports 18740-18744; run under
// `flock /tmp/cgs-platform.lock`): billing meters over SQS, sessions warns in poll, the portal and `cgs` show it.
// A billed minute and a session-clock minute are 1 s here (METERING_MINUTE_MS, SESSION_MINUTE_MS: test clocks), so
// the 10-minute warning window is 10 s. Money: a top-up of 5.00 leaves 3.00 after the month's storage (2.00) =
// 30 minutes at the default 0.10 a minute.
const MINUTE_MS = 1_000;
let platform: LaunchedPlatform;

beforeAll(async () => {
  platform = await launchPlatform({
    gatewayPort: 18740,
    servicePortBase: 18741,
    env: {
      ...fastJourneyEnv(`wallet-${Date.now()}-`),
      SESSION_MINUTE_MS: String(MINUTE_MS),
      METERING_MINUTE_MS: String(MINUTE_MS),
      AUTO_RECHARGE_INTERVAL_MS: "200",
      IDLE_SWEEP_INTERVAL_MS: "200",
    },
  });
}, 180_000);
afterAll(() => platform?.cleanup(), 60_000);

async function player(prefix: string): Promise<{ client: Client; home: string; token: string }> {
  const email = uniqueEmail(prefix);
  const pair = localSession(email);
  const home = mkdtempSync(path.join(os.tmpdir(), "cgs-wallet-"));
  const login = await runCgs(
    ["--base-url", platform.base, "login", "--with-token"],
    cgsEnv(home),
    JSON.stringify(pair),
  );
  expect(login.code).toBe(0);
  const client = createClient({ baseUrl: platform.base, apiKey: pair.accessToken });
  // An idle stop (no one plays here) must not come before the stops these tests watch.
  await client.settings.update({ idleTimeoutMinutes: 240 });
  return { client, home, token: pair.accessToken };
}
const cgs = (home: string, ...args: string[]) => runCgs(["--base-url", platform.base, ...args], cgsEnv(home));

async function waitForWarning(client: Client, kind: string, timeoutMs: number): Promise<SessionStatus> {
  return waitUntil(
    async () => {
      const s = await client.sessions.poll();
      if (s.state !== "running")
        throw new Error(`the session is ${s.state} before its warning: ${s.message}`);
      return s.warning?.kind === kind ? s : undefined;
    },
    { timeoutMs, intervalMs: 2_000, description: `a ${kind} warning in poll` },
  );
}

/**
 * Waits for the automatic stop, asking the sessions service itself every 100 ms (the gateway's poll bucket, 30 a
 * minute, is far too coarse to time a stop against 1-second minutes); answers when it was first seen.
 */
async function waitForStop(token: string, timeoutMs: number): Promise<{ status: SessionStatus; at: number }> {
  const sessions = `http://127.0.0.1:${platform.servicePorts[0]}/api/v1/sessions/poll`;
  const status = await waitUntil(
    async () => {
      const res = await fetch(sessions, { headers: { authorization: `Bearer ${token}` } });
      const s = (await res.json()) as SessionStatus;
      return s.state === "stopping" || s.state === "stopped" ? s : undefined;
    },
    { timeoutMs, intervalMs: 100, description: "the automatic stop" },
  );
  return { status, at: Date.now() };
}

describe("a balance that warns before play stops", () => {
  it("when the credit covers less than 10 minutes of play, then poll and `cgs session status` warn with the stop's time and a top-up hint, and the session stops then (not a minute early) for lack of credit", async () => {
    const { client, home, token } = await player("wallet-credit");
    await fundAccount(client, 500);
    expect((await client.credits.me()).balance).toBe(300);
    await client.sessions.start();
    await client.sessions.waitUntilReady({ timeoutMs: 30_000 });

    const warned = await waitForWarning(client, "credits", 40_000);
    expect(warned.warning).toMatchObject({ kind: "credits", canKeepPlaying: false });
    expect(warned.message).toMatch(
      /^Your credit covers about \d+ more min: this session stops at \d\d:\d\d UTC unless you top up\.$/,
    );
    const status = await cgs(home, "session", "status");
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/Warning: Your credit covers about \d+ more min: this session stops at/);
    expect(status.stdout).toContain("Top up with `cgs credits topup AMOUNT --open`.");

    const stopsAt = Date.parse(warned.warning!.stopsAt);
    const { status: stopped, at } = await waitForStop(token, 30_000);
    expect(stopped).toMatchObject({
      stopReason: "credits_exhausted",
      message: "Stopped because the credit ran out; top up to play again.",
    });
    // At the announced minute: not a billed minute (1 s here) before it, as it was before the forecast's minute
    // decided the stop, and within a few metering passes and queue hops after it.
    expect(at).toBeGreaterThanOrEqual(stopsAt);
    expect(at - stopsAt).toBeLessThan(5_000);
    const after = await cgs(home, "session", "status");
    expect(after.stdout).toContain("Stop reason: credits_exhausted");
    await waitUntil(async () => ((await client.credits.me()).balance === 0 ? true : undefined), {
      timeoutMs: 10_000,
      description: "the credit spent",
    });
  }, 120_000);
});

describe("spending limits", () => {
  it("when a running session reaches the daily limit, then it is warned naming the limit, stopped with stopReason spend_limit, and the next start is refused with SPEND_LIMIT_REACHED in the SDK and the CLI", async () => {
    const { client, home, token } = await player("wallet-limit");
    await fundAccount(client, 5_000);
    // Today's spending already holds the storage period (2.00): 2.50 more is 25 minutes of play.
    const set = await cgs(home, "credits", "limits", "set", "--daily", "450");
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/^Daily limit: 4\.50 USD \(2\.00 USD spent today, UTC; resets /);
    await client.sessions.start();
    await client.sessions.waitUntilReady({ timeoutMs: 30_000 });

    const warned = await waitForWarning(client, "spend_limit", 40_000);
    expect(warned.message).toMatch(
      /^Your daily spending limit of 4\.50 USD allows about \d+ more min: this session stops at \d\d:\d\d UTC unless you raise the limit\.$/,
    );
    const status = await cgs(home, "session", "status");
    expect(status.stdout).toContain("Raise it with `cgs credits limits set --daily CENTS` (or --monthly).");

    const { status: stopped } = await waitForStop(token, 30_000);
    expect(stopped).toMatchObject({
      stopReason: "spend_limit",
      message:
        "Stopped at your daily spending limit of 4.50 USD; it allows no more play until 00:00 UTC unless you raise it.",
    });
    await client.sessions.waitUntilStopped({ timeoutMs: 30_000 });
    const limits = await client.credits.limits.get();
    expect(limits).toMatchObject({ daily: 450, spentToday: 450 });

    const refused = await client.sessions.start().then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ code: "SPEND_LIMIT_REACHED", status: 409 });
    expect((refused as ApiError).message).toContain("daily spending limit of 4.50 USD leaves 0.00 USD today");
    const cli = await cgs(home, "session", "start");
    expect(cli.code).toBe(1);
    expect(cli.stderr).toMatch(/^SPEND_LIMIT_REACHED: Your daily spending limit of 4\.50 USD/m);

    // Raised, the limit lets play start again.
    await client.credits.limits.update({ daily: null });
    await client.sessions.start();
    await client.sessions.stop();
  }, 150_000);
});

describe("auto-recharge on the local checkout stand-in", () => {
  it("when a card is saved on the setup page and auto-recharge is on, then play that takes the balance under the threshold recharges it by itself, through the signed webhook, and `cgs credits auto-recharge` shows it", async () => {
    const { client, home } = await player("wallet-recharge");
    await fundAccount(client, 2_000);
    const setup = await cgs(home, "--json", "credits", "auto-recharge", "card");
    expect(setup.code).toBe(0);
    const { checkoutUrl } = JSON.parse(setup.stdout) as { checkoutUrl: string };
    const saved = await fetch(`${checkoutUrl}/save`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "card=4242",
      redirect: "manual",
    });
    expect(saved.status).toBe(303);
    await waitUntil(
      async () => ((await client.credits.autoRecharge.get()).paymentMethod ? true : undefined),
      {
        timeoutMs: 10_000,
        description: "the card saved",
      },
    );
    // 18.00 to play: under 16.00 (after 20 minutes, 20 s here) it goes back up to 25.00.
    const on = await cgs(
      home,
      "credits",
      "auto-recharge",
      "on",
      "--threshold",
      "1600",
      "--to",
      "2500",
      "--monthly-limit",
      "10000",
    );
    expect(on.code).toBe(0);
    expect(on.stdout).toContain(
      "Auto-recharge: on, under 16.00 USD recharge to 25.00 USD, at most 100.00 USD a month",
    );
    expect(on.stdout).toMatch(/Card: visa ending 4242, expires \d\d\/\d{4}/);

    await client.sessions.start();
    await client.sessions.waitUntilReady({ timeoutMs: 30_000 });
    const recharged = await waitUntil(
      async () => {
        const a = await client.credits.autoRecharge.get();
        return a.lastRecharge?.status === "succeeded" ? a : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, description: "the recharge credited" },
    );
    expect(recharged.rechargedThisMonth).toBe(recharged.lastRecharge!.amount);
    expect((await client.credits.me()).balance).toBeGreaterThan(2_300);
    const shown = await cgs(home, "credits", "auto-recharge");
    expect(shown.stdout).toMatch(/Last recharge: \d+\.\d\d USD succeeded/);
    const { data } = await client.raw.GET("/api/v1/credits/transactions");
    expect(data!.items.some((t) => t.description === "Auto-recharge")).toBe(true);
    // No credit warning came: the balance never got near its end.
    expect((await client.sessions.poll()).warning).toBeNull();
    await client.sessions.stop();
  }, 150_000);
});

describeWithChromium("the billing page's guardrails")("the portal's /billing and play warnings", () => {
  let browser: Browser;
  let user: TestUser;

  beforeAll(async () => {
    browser = await launchChromium();
    user = await createTestUser(uniqueEmail("wallet-portal"), { password: "Wallet-pass-1" });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await user?.remove();
  });

  it("when a player saves a card, turns auto-recharge on and sets a daily limit on /billing, then the page shows them, and the play page warns before the limit with a link to raise it", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await signIn(page, platform.base, user);
    const client = createClient({ baseUrl: platform.base, apiKey: localSession(user.email).accessToken });
    await fundAccount(client, 5_000);
    await client.settings.update({ idleTimeoutMinutes: 240 });

    await page.goto(`${platform.base}/billing`);
    await page.locator("#card", { hasText: "No card saved" }).waitFor();
    await Promise.all([page.waitForURL(/\/local-checkout\//), page.click("#card-save")]);
    await Promise.all([page.waitForURL(/\/billing/), page.click("text=Save Visa ending 4242")]);
    await page
      .locator("#recharge-message", { hasText: "Card saved. Turn auto-recharge on below." })
      .waitFor({ timeout: 30_000 });
    expect(await page.textContent("#card")).toMatch(/^Visa ending 4242, expires \d\d\/\d{4}$/);
    await page.check("#recharge-enabled");
    await page.fill("#recharge-threshold", "10.00");
    await page.fill("#recharge-to", "40.00");
    await page.fill("#recharge-limit", "100.00");
    await page.click("#recharge-save");
    await page.locator("#recharge-message", { hasText: "Auto-recharge is on." }).waitFor();
    expect(await page.textContent("#recharge-status")).toMatch(/^On: under .*10\.00, back to .*40\.00$/);
    // 2.00 spent on storage today: 2.50 more is 25 minutes of play.
    await page.fill("#limit-daily", "4.50");
    await page.click("#limits-save");
    await page.locator("#limits-message", { hasText: "Limits saved." }).waitFor();
    expect(await page.textContent("#spent-today")).toMatch(/2\.00 of .*4\.50/);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "billing-guardrails");

    await page.goto(`${platform.base}/`);
    await page.locator("#start:not([disabled])").click();
    await page.locator("#session-state", { hasText: "Running" }).waitFor({ timeout: 30_000 });
    const banner = page.locator("#session-warning");
    await banner.waitFor({ state: "visible", timeout: 40_000 });
    expect(await page.textContent("#session-warning-text")).toMatch(
      /^Your daily spending limit of 4\.50 USD allows about \d+ more min: this session stops at \d\d:\d\d( [AP]M)? unless you raise the limit\.$/,
    );
    expect(await page.textContent("#session-warning-left")).toMatch(/^\(\d+:\d\d left\)$/);
    expect(await page.isVisible("#warning-limits")).toBe(true);
    expect(await page.isVisible("#warning-topup")).toBe(false);
    expect(await page.isVisible("#keep-playing")).toBe(false);
    await screenshots(page, "play-spend-limit-warning");

    await page.locator("#session-state", { hasText: /Stopping|Stopped/ }).waitFor({ timeout: 40_000 });
    await page.locator("#start:not([disabled])").waitFor({ timeout: 40_000 });
    await page.click("#start");
    await page.locator("#session-message", { hasText: "daily spending limit of 4.50 USD" }).waitFor();
    expect(await page.isVisible("#session-message a[href='/billing#limits']")).toBe(true);
    await screenshots(page, "play-spend-limit-refused");
    expect(errors).toEqual([]);
  }, 180_000);
});
