import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { Page } from "playwright-core";
import type { TestUser } from "@cgs/shared/testing/keycloak";
import { launchPlatform, type LaunchedPlatform } from "../platform/launch-platform";

/** Gitignored: every page at 1280 and 360 px, written by the portal's browser tests for people to look at. */
export const SCREENSHOT_DIR = path.resolve(__dirname, "../../gateway/test-artifacts/portal");

/**
 * The whole platform (`npm start`'s launcher: the four services, the gateway, the cloud simulator and the
 * local checkout) on ports of the test's own (the gateway on `gatewayPort`, the services on the next four): jest
 * runs the portal's platform tests in parallel workers, so two sharing ports collide. Run under
 * `flock /tmp/cgs-platform.lock` when other engineers share the machine.
 */
export function launchPortalPlatform(
  name: string,
  gatewayPort: number,
  env: Record<string, string> = {},
): Promise<LaunchedPlatform> {
  return launchPlatform({
    gatewayPort,
    servicePortBase: gatewayPort + 1,
    env: {
      // Slow enough that a person (and the test) sees the session's progress, fast enough for CI.
      SIMULATOR_BOOT_DELAY_MS: "1500",
      SIMULATOR_HOST_READY_DELAY_MS: "1000",
      RECONCILER_INTERVAL_MS: "200",
      METERING_INTERVAL_MS: "200",
      QUEUE_WAIT_SECONDS: "1",
      QUEUE_NAME_PREFIX: `${name}-${Date.now()}-`,
      ...env,
    },
  });
}

/** The sessions service's simulator control routes (never exposed by the gateway). */
export async function simulatorFaults(
  platform: LaunchedPlatform,
  faults: Record<string, unknown>,
): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${platform.servicePorts[0]}/internal/v1/simulator/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(faults),
  });
  if (res.status !== 204) throw new Error(`simulator faults answered ${res.status}`);
}

/** Signs in through the portal and Keycloak's login page, as a player does; ends on the play page. */
export async function signIn(page: Page, base: string, user: TestUser): Promise<void> {
  await page.goto(`${base}/`);
  await page.waitForURL(`${base}/login`);
  await Promise.all([
    page.waitForURL(/\/realms\/cgs\/protocol\/openid-connect\/auth/),
    page.click("#signin"),
  ]);
  await page.fill("#username", user.email);
  await page.fill("#password", user.password!);
  await Promise.all([page.waitForURL(`${base}/`), page.click("#kc-login")]);
}

const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core in the page (evaluated over DevTools, so the page's CSP stays as strict as ever), both colour schemes. */
export async function seriousViolations(page: Page): Promise<string[]> {
  const found: string[] = [];
  for (const colorScheme of ["light", "dark"] as const) {
    await page.emulateMedia({ colorScheme });
    const hasAxe = await page.evaluate(() => "axe" in globalThis);
    if (!hasAxe) await page.evaluate(axeSource);
    const violations = await page.evaluate(async () => {
      const axe = (globalThis as unknown as { axe: { run(): Promise<{ violations: AxeViolation[] }> } }).axe;
      return (await axe.run()).violations;
    });
    for (const v of violations) {
      if (v.impact === "serious" || v.impact === "critical") {
        found.push(
          `${colorScheme} ${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(" ")).join(", ")}`,
        );
      }
    }
  }
  await page.emulateMedia({ colorScheme: "light" });
  return found;
}

/** Full-page screenshots at 1280 and 360 px wide (the latter in the dark scheme too). */
export async function screenshots(page: Page, name: string): Promise<string[]> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const original = page.viewportSize() ?? { width: 1280, height: 800 };
  const files: string[] = [];
  const shots = [
    { width: 1280, height: 800, scheme: "light" as const, suffix: "1280" },
    { width: 360, height: 740, scheme: "light" as const, suffix: "360" },
    { width: 360, height: 740, scheme: "dark" as const, suffix: "360-dark" },
  ];
  for (const shot of shots) {
    await page.setViewportSize({ width: shot.width, height: shot.height });
    await page.emulateMedia({ colorScheme: shot.scheme });
    const file = path.join(SCREENSHOT_DIR, `${name}-${shot.suffix}.png`);
    await page.screenshot({ path: file, fullPage: true });
    files.push(file);
  }
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize(original);
  return files;
}

/** What the page's copy button put on the clipboard. */
export function readClipboard(page: Page): Promise<string> {
  return page.evaluate(() =>
    (
      globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
    ).navigator.clipboard.readText(),
  );
}
