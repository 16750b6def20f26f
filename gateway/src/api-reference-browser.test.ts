import { mkdirSync } from "node:fs";
import path from "node:path";
import type { Browser, Page } from "playwright-core";
import { startTestIdentityProvider, type TestIdentityProvider } from "@cgs/shared/testing/tokens";
import { startTestGateway, type TestGateway } from "../../test/harnesses/gateway-harness";
import { describeWithChromium, launchChromium } from "../../test/harnesses/portal-browser-harness";

const ARTIFACTS = path.resolve(__dirname, "../test-artifacts/api-reference");

/** Records what the browser reports: CSP violations (the DOM event), console errors and uncaught errors. */
async function watch(page: Page): Promise<() => Promise<string[]>> {
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  // Scripts as strings: the tests are type-checked without the DOM library.
  await page.addInitScript(`
    window.cspViolations = [];
    document.addEventListener("securitypolicyviolation", (e) =>
      window.cspViolations.push(e.violatedDirective + ": " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber));
  `);
  return async () => [...((await page.evaluate("window.cspViolations")) as string[]), ...errors];
}

describeWithChromium("the API reference browser test")("the API reference in a real browser", () => {
  let idp: TestIdentityProvider;
  let gw: TestGateway;
  let browser: Browser;

  beforeAll(async () => {
    idp = await startTestIdentityProvider();
    gw = await startTestGateway(idp);
    browser = await launchChromium();
    mkdirSync(ARTIFACTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await gw?.close();
    await idp?.close();
  });

  it.each([
    ["desktop", { width: 1280, height: 900 }],
    ["phone", { width: 360, height: 740 }],
  ])(
    "when a %s opens /docs/api and picks an operation from the list, then it is shown and the CSP blocks nothing",
    async (name, viewport) => {
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      const reported = await watch(page);
      await page.goto(`${gw.url}/docs/api`);
      // The colour-mode script ran (it puts a class on <html>) ...
      await page.waitForFunction("/\\b(light|dark)\\b/.test(document.documentElement.className)");
      // ... and Redoc's: the operations of a tag are listed only once its script opens the tag.
      if (name === "phone") {
        // On a phone the list sits behind the floating menu button.
        await page.getByRole("button", { name: "Open navigation menu" }).click();
      }
      await page.locator(':text-is("sessions"):visible').first().click();
      const operation = page.locator(':text-is("Provision and start an instance"):visible').first();
      await operation.waitFor();
      await operation.click();
      await page.waitForURL(/\/docs\/api#\/sessions\/startsession$/);
      await page.getByRole("heading", { name: "Provision and start an instance" }).first().waitFor();
      await page.waitForTimeout(500);
      await page.screenshot({ path: path.join(ARTIFACTS, `api-reference-${name}.png`) });
      expect(await reported()).toEqual([]);
      await context.close();
    },
    60_000,
  );
});
