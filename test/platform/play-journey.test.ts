import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { createClient, type Client, type SessionStatus } from "@cgs/sdk";
import { createTestUser, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import { waitUntil } from "@cgs/shared/testing/queue";
import { fundAccount, localSession } from "../harnesses/client-platform";
import { cgsEnv, runCgs, spawnCgs } from "../harnesses/run-cgs";
import { describeWithChromium, launchChromium } from "../harnesses/portal-browser-harness";
import { screenshots, seriousViolations, signIn } from "../harnesses/portal-platform-kit";
import { fastJourneyEnv, launchPlatform, type LaunchedPlatform } from "./launch-platform";

// Play as a player meets it, on `npm start` (ports 18720-18724; run under `flock /tmp/cgs-platform.lock`): every
// simulated instance runs the host agent's real code, billing meters over SQS, and the session clock and billed
// minutes are 1 s long (SESSION_MINUTE_MS, METERING_MINUTE_MS: test clocks, never real minutes). The pretend
// streaming client is `cgs session play --simulate`, typed as a developer would.
const MINUTE_MS = 1_000;
let platform: LaunchedPlatform;

beforeAll(async () => {
  platform = await launchPlatform({
    gatewayPort: 18720,
    servicePortBase: 18721,
    env: {
      ...fastJourneyEnv(`play-${Date.now()}-`),
      SESSION_MINUTE_MS: String(MINUTE_MS),
      METERING_MINUTE_MS: String(MINUTE_MS),
      // Half the idle timeout at most: long enough that the portal's 15 s poll sees the warning.
      IDLE_WARNING_MINUTES: "30",
      SIMULATOR_AGENT_REPORT_INTERVAL_MS: "1000",
      IDLE_SWEEP_INTERVAL_MS: "200",
    },
  });
}, 180_000);
afterAll(() => platform?.cleanup(), 60_000);

async function signedInClient(email: string): Promise<{ client: Client; home: string }> {
  const pair = localSession(email);
  const home = mkdtempSync(path.join(os.tmpdir(), "cgs-play-"));
  const login = await runCgs(
    ["--base-url", platform.base, "login", "--with-token"],
    cgsEnv(home),
    JSON.stringify(pair),
  );
  expect(login.code).toBe(0);
  return { client: createClient({ baseUrl: platform.base, apiKey: pair.accessToken }), home };
}

const cgs = (home: string, ...args: string[]) => runCgs(["--base-url", platform.base, ...args], cgsEnv(home));

describe("play keeps a session alive; an abandoned one is warned and stopped", () => {
  it("when a player streams with input for three idle periods and makes no API call, then the session runs on and every minute is billed; after they leave, it is warned and stopped as idle, and `cgs session status` says why", async () => {
    const { client, home } = await signedInClient(uniqueEmail("play-journey"));
    await fundAccount(client, 5_000);
    await client.settings.update({ idleTimeoutMinutes: 5 });
    const before = (await client.credits.me()).balance;
    await client.sessions.start();
    const ready = await client.sessions.waitUntilReady({ timeoutMs: 30_000 });
    const simulatorUrl = `http://127.0.0.1:${platform.servicePorts[0]}`;

    // The pretend client: connected, with input every second, for three idle periods (3 x 5 s).
    const player = spawnCgs(
      [
        "--base-url",
        platform.base,
        "session",
        "play",
        "--simulate",
        "--simulator-url",
        simulatorUrl,
        "--input-every",
        "1",
      ],
      cgsEnv(home),
    );
    let playerOut = "";
    player.stdout.on("data", (d) => (playerOut += d));
    player.stderr.on("data", (d) => (playerOut += d));
    await waitUntil(() => playerOut.includes("Playing on"), {
      timeoutMs: 10_000,
      description: `cgs play (${playerOut})`,
    });
    await new Promise((r) => setTimeout(r, 3 * 5 * MINUTE_MS + MINUTE_MS));

    const during = await cgs(home, "session", "status");
    expect(during.code).toBe(0);
    expect(during.stdout).toContain("State: running (ready)");
    expect(during.stdout).not.toContain("Warning:");

    // The player leaves: Ctrl-C disconnects the pretend client.
    player.kill("SIGINT");
    await new Promise((r) => player.once("close", r));
    expect(playerOut).toContain(`Disconnected the pretend streaming client from ${ready.instanceId}`);

    const warned = await waitUntil(
      async () => {
        const status = await cgs(home, "session", "status");
        return status.stdout.includes("Warning:") ? status.stdout : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 500, description: "the idle warning in cgs session status" },
    );
    expect(warned).toMatch(
      /Warning: No input for \d+ min: this session stops at \d\d:\d\d UTC unless you play/,
    );
    expect(warned).toContain("cgs session keepalive");

    const stopped = await waitUntil(
      async () => {
        const s = await client.sessions.poll();
        return s.state === "stopped" ? s : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 500, description: "the idle stop" },
    );
    expect(stopped).toMatchObject({ stopReason: "idle" });
    const after = await cgs(home, "session", "status");
    expect(after.stdout).toContain("Stop reason: idle");
    expect(after.stdout).toContain("Note: Stopped after 5 min without play");

    // Billed: every started minute from running to the stop, at the wallet's rate, in one play line.
    const credits = await waitUntil(
      async () => {
        const me = await client.credits.me();
        return me.balance < before ? me : undefined;
      },
      { timeoutMs: 15_000, description: "the play charged" },
    );
    const { data } = await client.raw.GET("/api/v1/credits/transactions");
    const play = data!.items.find((t) => t.type === "play");
    const minutes = play!.minutes!;
    const played = (Date.parse(stopped.startedAt!) - Date.now()) / -MINUTE_MS;
    // At least three idle periods of play plus the warning and idle time that followed; never more than wall time.
    expect(minutes).toBeGreaterThanOrEqual(3 * 5 + 5);
    expect(minutes).toBeLessThanOrEqual(Math.ceil(played) + 1);
    expect(play!.amount).toBe(-minutes * credits.ratePerMinute);
  }, 120_000);
});

describeWithChromium("the play page's warning")("the play page warns before an idle stop", () => {
  let browser: Browser;
  let page: Page;
  let user: TestUser;

  beforeAll(async () => {
    browser = await launchChromium();
    user = await createTestUser(uniqueEmail("play-warning"), { password: "Warning-pass-1" });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await user?.remove();
  });

  it("when nobody plays, then the page shows the warning with its time left and Keep playing, which postpones the stop", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await context.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await signIn(page, platform.base, user);
    const pair = localSession(user.email);
    const client = createClient({ baseUrl: platform.base, apiKey: pair.accessToken });
    await fundAccount(client, 5_000);
    // 60 s idle timeout (1 s minutes), warned for the last 30 s.
    await client.settings.update({ idleTimeoutMinutes: 60 });
    await page.reload();
    await page.locator("#start:not([disabled])").click();
    await page.locator("#session-state", { hasText: "Running" }).waitFor({ timeout: 30_000 });

    const banner = page.locator("#session-warning");
    await banner.waitFor({ state: "visible", timeout: 60_000 });
    expect(await page.textContent("#session-warning-text")).toMatch(
      // In the browser's local time, not the UTC the API speaks.
      /^No input for \d+ min: this session stops at \d\d:\d\d( [AP]M)? unless you play or choose Keep playing\.$/,
    );
    expect(await page.textContent("#session-warning-left")).toMatch(/^\(\d+:\d\d left\)$/);
    expect(await page.isVisible("#keep-playing")).toBe(true);
    expect(await page.isVisible("#warning-topup")).toBe(false);
    await screenshots(page, "play-idle-warning");
    const warned = (await client.sessions.poll()) as SessionStatus;

    await page.click("#keep-playing");
    await banner.waitFor({ state: "hidden" });
    expect(await page.textContent("#session-message")).toContain("Keep playing");
    const kept = await client.sessions.poll();
    expect(kept.state).toBe("running");
    expect(kept.warning).toBeNull();
    expect(warned.warning?.kind).toBe("idle");

    // The device the player pairs (the pretend client enters the PIN as it connects) is listed on /devices, and
    // Remove unpairs it.
    await client.sessions.pair({ deviceName: "living-room-tv" });
    const { instanceId } = await client.sessions.poll();
    const play = await fetch(
      `http://127.0.0.1:${platform.servicePorts[0]}/internal/v1/simulator/instances/${instanceId}/play`,
      {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ connected: true }),
      },
    );
    expect(play.status).toBe(200);
    await page.goto(`${platform.base}/devices`);
    const row = page.locator("#devices-body tr", { hasText: "living-room-tv" });
    await row.waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "devices");
    await row.getByRole("button", { name: "Remove living-room-tv" }).click();
    await page.locator("#devices-message", { hasText: "living-room-tv was unpaired." }).waitFor();
    await page.locator("#devices-table").waitFor({ state: "hidden" });
    expect(await client.devices.list()).toEqual([]);
    await client.sessions.stop();
    expect(errors).toEqual([]);
    await context.close();
  }, 150_000);
});
