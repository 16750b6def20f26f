import type { Browser } from "playwright-core";
import { waitUntil } from "@cgs/shared/testing/queue";
import { createTestUser, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import type { LaunchedPlatform } from "../../test/platform/launch-platform";
import { describeWithChromium, launchChromium } from "../../test/harnesses/portal-browser-harness";
import { launchPortalPlatform, signIn } from "../../test/harnesses/portal-platform-kit";

// Needs billing's GET /api/v1/credits/transactions (listCreditTransactions); until billing serves it the
// billing page shows "History not available yet" and this test fails.
describeWithChromium("the portal ledger browser test")("the portal's billing history", () => {
  let platform: LaunchedPlatform;
  let browser: Browser;
  let user: TestUser;

  beforeAll(async () => {
    platform = await launchPortalPlatform("portal-ledger", 18690);
    browser = await launchChromium();
    user = await createTestUser(uniqueEmail("ledger"), { password: "Ledger-pass-1" });
  }, 240_000);

  afterAll(async () => {
    await browser?.close();
    await user?.remove();
    await platform?.cleanup();
  }, 60_000);

  it("when the player has topped up through the checkout, then the top-up is one line of the history with the balance after it, even when the history answers slowly", async () => {
    const base = platform.base;
    const page = await browser.newPage();
    await signIn(page, base, user);
    // Billing answers slowly here (a fault the real service will not produce on demand, so the browser holds each
    // history response back): the history the page asks for on its return from checkout is still in flight when the
    // credit lands and the page asks again. The slow answer must not be added to the new list.
    let historyInFlight = 0;
    await page.route("**/api/v1/credits/transactions*", async (route) => {
      historyInFlight += 1;
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      await route.continue().finally(() => (historyInFlight -= 1));
    });
    await page.goto(`${base}/billing`);
    await page.check("input[name=preset][value='1000']");
    await Promise.all([page.waitForURL(/\/local-checkout\/cs_local_/), page.click("#topup-submit")]);
    await Promise.all([page.waitForURL(`${base}/billing`), page.click("button:text('Pay')")]);
    await page.locator("#topup-message", { hasText: "has been credited" }).waitFor({ timeout: 30_000 });

    const row = page.locator("#ledger-body tr", { hasText: "+$10.00" });
    await row.first().waitFor({ timeout: 20_000 });
    await waitUntil(() => historyInFlight === 0, { timeoutMs: 20_000, description: "the history requests" });
    await page.waitForTimeout(500);
    expect(await row.count()).toBe(1);
    const cells = await row.locator("td").allTextContents();
    expect(cells[2]).toBe("+$10.00");
    expect(cells[3]).toMatch(/^\$\d+\.\d\d$/);
    expect(await page.isVisible("#ledger-table")).toBe(true);
    await page.close();
  }, 90_000);
});
