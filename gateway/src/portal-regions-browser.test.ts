import type { Browser, Page } from "playwright-core";
import { createTestUser, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import type { LaunchedPlatform } from "../../test/platform/launch-platform";
import { describeWithChromium, launchChromium } from "../../test/harnesses/portal-browser-harness";
import {
  launchPortalPlatform,
  screenshots,
  seriousViolations,
  signIn,
  simulatorFaults,
} from "../../test/harnesses/portal-platform-kit";

const GATEWAY_PORT = 18790;
// The farther region comes first in the configured order, so a start that ignored the browser's measurements
// (auto without rttMs tries the configured order) would land there and fail the test.
const REGIONS = [
  { id: "us-east-1", name: "US East (N. Virginia)", latencyMs: 120 },
  { id: "eu-west-1", name: "Europe (Ireland)", latencyMs: 20 },
];

// The Play page's Region panel and the line in real Chromium, against the running platform (npm start's launcher,
// which points the portal's CSP at its beacons) with two simulated regions whose beacons answer after different
// delays.
describeWithChromium("the portal regions browser test")("the portal, regions and the line", () => {
  let platform: LaunchedPlatform;
  let browser: Browser;
  let page: Page;
  let base: string;
  let user: TestUser;
  const problems: string[] = [];

  beforeAll(async () => {
    platform = await launchPortalPlatform("portal-regions", GATEWAY_PORT, {
      CLOUD_CAPACITY_RETRY_AFTER_SECONDS: "1",
      REGIONS: JSON.stringify(
        REGIONS.map((r) => ({ id: r.id, name: r.name, simulator: { latencyMs: r.latencyMs, capacity: 4 } })),
      ),
    });
    base = platform.base;
    browser = await launchChromium();
    user = await createTestUser(uniqueEmail("regions"), { password: "Regions-pass-1" });
    page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    page.on("console", (m) => {
      // A CSP violation is reported as a console error too.
      if (m.type() === "error") problems.push(m.text());
    });
    page.on("pageerror", (e) => problems.push(e.message));
    await signIn(page, base, user);
    // Credit through the local checkout, from the page's own origin (the cookie session).
    const checkoutUrl = await page.evaluate(async () => {
      const res = await fetch("/api/v1/credits/topup", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
        body: JSON.stringify({ amount: 2000 }),
      });
      return ((await res.json()) as { checkoutUrl: string }).checkoutUrl;
    });
    const paid = await fetch(`${checkoutUrl}/pay`, { method: "POST", redirect: "manual" });
    expect(paid.status).toBe(303);
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await user?.remove();
    await platform?.cleanup();
  }, 60_000);

  afterEach(() => {
    // Chromium logs every refused API answer; the 503 of a full cloud is one this test asks for.
    expect(
      problems.filter((e) => !/Failed to load resource: the server responded with a status of 503/.test(e)),
    ).toEqual([]);
  });

  const text = async (selector: string) => ((await page.textContent(selector)) ?? "").trim();

  async function regionRows(): Promise<{ name: string; rtt: string; capacity: string }[]> {
    const rows = page.locator("#regions-body tr");
    const out = [];
    for (let i = 0; i < (await rows.count()); i++) {
      const [name, rtt, capacity] = await rows.nth(i).locator("td").allTextContents();
      out.push({ name: name!, rtt: rtt!, capacity: capacity! });
    }
    return out;
  }

  async function waitUntilRows(
    ok: (rows: { name: string; rtt: string; capacity: string }[]) => boolean,
  ): Promise<void> {
    const deadline = Date.now() + 10_000;
    let rows = await regionRows();
    while (!ok(rows)) {
      if (Date.now() > deadline) throw new Error(`the Region panel still shows ${JSON.stringify(rows)}`);
      await page.waitForTimeout(200);
      rows = await regionRows();
    }
  }

  it("when the player opens the Play page, then the Region panel lists the regions nearest first with the measured round trips, the nearest marked", async () => {
    await page.goto(`${base}/`);
    await page.locator("#regions-state", { hasText: "Nearest:" }).waitFor({ timeout: 20_000 });
    const rows = await regionRows();
    expect(rows.map((r) => r.name)).toEqual(["Europe (Ireland) Nearest", "US East (N. Virginia)"]);
    const [near, far] = rows.map((r) => Number(/^(\d+) ms$/.exec(r.rtt)?.[1]));
    // Each beacon answers after its region's delay; the median round trip is at least that, and not much more.
    expect(near).toBeGreaterThanOrEqual(20);
    expect(near).toBeLessThan(100);
    expect(far).toBeGreaterThanOrEqual(120);
    expect(rows.map((r) => r.capacity)).toEqual(["Available", "Available"]);
    // The account never saved a preference: the choice starts at the default, the nearest.
    expect(await page.inputValue("#region-choice")).toBe("auto");
    expect(await page.locator("#region-choice option").allTextContents()).toEqual([
      "Nearest (auto)",
      "US East (N. Virginia)",
      "Europe (Ireland)",
    ]);
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "play-regions");
  }, 60_000);

  it("when the player starts with Nearest (auto), then the session lands in the nearest region and the card says so", async () => {
    const sent: unknown[] = [];
    page.on("request", (r) => {
      if (r.url().endsWith("/api/v1/sessions/start")) sent.push(r.postDataJSON());
    });
    await page.selectOption("#region-choice", "auto");
    await page.click("#start");
    await page.locator("#session-state", { hasText: /Starting|Running/ }).waitFor();
    await page.locator("#session-region", { hasText: "Europe (Ireland)" }).waitFor({ timeout: 10_000 });
    const body = sent[0] as { region: string; maxRttMs: number; rttMs: Record<string, number> };
    expect(body.region).toBe("auto");
    expect(body.maxRttMs).toBe(150);
    expect(Object.keys(body.rttMs).sort()).toEqual(["eu-west-1", "us-east-1"]);
    await page.locator("#session-ready", { hasText: "Yes" }).waitFor({ timeout: 30_000 });
    expect(await text("#session-region")).toBe("Europe (Ireland)");
    await screenshots(page, "play-running-region");
    await page.click("#stop");
    await page.locator("#session-state", { hasText: "Stopped" }).waitFor({ timeout: 30_000 });
  }, 90_000);

  it("when every region is full, then the refusal offers Wait in line, the card shows the place in line, and Leave the line stops it", async () => {
    await simulatorFaults(platform, { capacityExhausted: true });
    try {
      // Start waits out the previous refusal's Retry-After, if any.
      await page.locator("#start:not([disabled])").waitFor();
      await page.selectOption("#region-choice", "auto");
      await page.click("#start");
      const message = page.locator("#session-message");
      await message.filter({ hasText: "Every region you allowed is full" }).waitFor({ timeout: 20_000 });
      expect(await page.isVisible("#wait-in-line")).toBe(true);
      // The panel re-reads capacity after the refusal (keeping the measured round trips).
      await waitUntilRows((rows) => rows.every((r) => r.capacity === "Full" && / ms$/.test(r.rtt)));
      await screenshots(page, "play-capacity");

      await page.click("#wait-in-line");
      await page.locator("#session-state", { hasText: "In line" }).waitFor();
      await page
        .locator("#session-progress-text", {
          hasText:
            /^In line for (Europe \(Ireland\)|US East \(N\. Virginia\))( or .*)?: 1st, (under a minute|about \d+ min)$/,
        })
        .waitFor();
      expect(await page.isVisible("#wait-in-line")).toBe(false);
      // Nothing is charged while in line: no elapsed time, no cost.
      expect([await text("#session-elapsed"), await text("#session-cost")]).toEqual(["—", "—"]);
      await waitUntilRows((rows) => rows.every((r) => r.capacity === "Full, 1 in line"));
      const leave = page.locator("#stop");
      expect(await leave.textContent()).toBe("Leave the line");
      expect(await seriousViolations(page)).toEqual([]);
      await screenshots(page, "play-queued");

      await leave.click();
      await page.locator("#session-state", { hasText: "Stopped" }).waitFor({ timeout: 20_000 });
      expect(await text("#session-message")).toBe("You left the line. Nothing was charged.");
      // Poll agrees: the line was left, not just the page.
      const polled = await page.evaluate(async () => {
        const res = await fetch("/api/v1/sessions/poll");
        return ((await res.json()) as { state: string; queue: unknown }).state;
      });
      expect(polled).toBe("stopped");
    } finally {
      await simulatorFaults(platform, { capacityExhausted: false });
    }
  }, 90_000);

  it("when the player opens Settings, then the region is a choice of Nearest (auto) and the regions by name, and auto saves", async () => {
    await page.goto(`${base}/settings`);
    await page.locator("#settings-save:not([disabled])").waitFor();
    expect(await page.locator("#pref-region option").allTextContents()).toEqual([
      "Nearest (auto)",
      "US East (N. Virginia)",
      "Europe (Ireland)",
    ]);
    await page.selectOption("#pref-region", "eu-west-1");
    await page.click("#settings-save");
    await page.locator("#settings-message", { hasText: "Preferences saved" }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    await screenshots(page, "settings-region");

    // The Play page starts from the saved preference.
    await page.goto(`${base}/`);
    await page.locator("#regions-state", { hasText: "Nearest:" }).waitFor({ timeout: 20_000 });
    expect(await page.inputValue("#region-choice")).toBe("eu-west-1");

    await page.goto(`${base}/settings`);
    await page.locator("#settings-save:not([disabled])").waitFor();
    expect(await page.inputValue("#pref-region")).toBe("eu-west-1");
    await page.selectOption("#pref-region", "auto");
    await page.click("#settings-save");
    await page.locator("#settings-message", { hasText: "Preferences saved" }).waitFor();
    await page.goto(`${base}/`);
    await page.locator("#regions-state", { hasText: "Nearest:" }).waitFor({ timeout: 20_000 });
    expect(await page.inputValue("#region-choice")).toBe("auto");
  }, 60_000);
});
