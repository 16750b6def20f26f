import type { Browser } from "playwright-core";
import { createTestUser, totpCode, uniqueEmail, type TestUser } from "@cgs/shared/testing/keycloak";
import { waitForMail } from "@cgs/shared/testing/mail";
import {
  describeWithChromium,
  startPortalBrowserHarness,
  type PortalBrowserHarness,
} from "../../test/harnesses/portal-browser-harness";

/** A signed token: what a session cookie holds, never a clearing cookie's empty value. */
const JWT = /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/;

describeWithChromium("the portal browser test")("portal in a real browser", () => {
  let portal: PortalBrowserHarness;
  let browser: Browser;
  let base: string;
  let user: TestUser;

  beforeAll(async () => {
    portal = await startPortalBrowserHarness("portal");
    ({ browser, base } = portal);
    user = await createTestUser(uniqueEmail("browser"), { password: "Original-pass-1", totp: true });
  }, 120_000);

  afterAll(async () => {
    await user?.remove();
    await portal?.close();
  });

  it("when a user resets the password in the portal, then the new password signs in and the old one is refused", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const consoleErrors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });

    await page.goto(`${base}/forgot-password`);
    await page.fill("#email", user.email);
    await page.click("#submit");
    await page.waitForSelector("#message.success");
    expect(await page.textContent("#message")).toContain("If an account uses this address");

    const mail = await waitForMail(user.email, { timeoutMs: 20_000 });
    const link = /(http:\/\/127\.0\.0\.1:\d+\/reset-password\?token=[A-Za-z0-9_.-]+)/.exec(mail.Text)?.[1];
    expect(link?.startsWith(`${base}/reset-password?token=`)).toBe(true);

    await page.goto(link!);
    // The page checks the server's rules before sending anything.
    await page.fill("#password", "too-short");
    await page.fill("#confirm", "too-short");
    await page.click("#submit");
    expect(await page.textContent("#message")).toContain("at least 10 characters");
    await page.fill("#password", "Brand-new-pass-2");
    await page.fill("#confirm", "Brand-new-pass-3");
    await page.click("#submit");
    expect(await page.textContent("#message")).toContain("do not match");
    // The server's own rule: the previous password is refused.
    await page.fill("#password", "Original-pass-1");
    await page.fill("#confirm", "Original-pass-1");
    await page.click("#submit");
    await page.locator("#message", { hasText: "different" }).waitFor();

    await page.fill("#password", "Brand-new-pass-2");
    await page.fill("#confirm", "Brand-new-pass-2");
    await Promise.all([page.waitForURL(`${base}/login?status=password-updated`), page.click("#submit")]);
    expect(await page.textContent("#banner")).toContain("Password updated");

    // Sign in through Keycloak (authorization code + PKCE): the old password is refused...
    await Promise.all([
      page.waitForURL(/\/realms\/cgs\/protocol\/openid-connect\/auth/),
      page.click("#signin"),
    ]);
    await page.fill("#username", user.email);
    await page.fill("#password", "Original-pass-1");
    await page.click("#kc-login");
    await page.waitForSelector("#input-error, .kc-feedback-text, [class*=alert-error]");
    expect(await page.content()).toContain("Invalid username or password");
    expect(page.url().startsWith(base)).toBe(false);

    // ...the new one is accepted, the second factor is still asked for, and the user lands on the
    // signed-in page with the HttpOnly session cookie.
    await page.fill("#password", "Brand-new-pass-2");
    await page.click("#kc-login");
    await page.waitForSelector("#otp");
    await page.fill("#otp", totpCode(user.totpSecret!));
    // Sign-in lands on the play page; the account page shows who is signed in.
    await Promise.all([page.waitForURL(`${base}/`), page.click("#kc-login")]);
    await page.goto(`${base}/account`);
    await page.locator("#identity", { hasText: "Signed in" }).waitFor();
    expect(await page.textContent("#identity")).toBe(`Signed in as ${user.email}`);
    const session = (await context.cookies(base)).find((c) => c.name === "cgs_session");
    expect(session).toMatchObject({
      httpOnly: true,
      sameSite: "Lax",
      path: "/",
      value: expect.stringMatching(JWT),
    });
    expect(session!.expires).toBeGreaterThan(Date.now() / 1000 + 3000);
    // The refresh token rides in its own encrypted cookie for Keycloak's 30-day SSO idle timeout; Chromium
    // stores it (SameSite=Strict) although the callback is the end of a redirect chain from Keycloak.
    const refresh = (await context.cookies(base)).find((c) => c.name === "cgs_refresh");
    expect(refresh).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/" });
    expect(refresh!.value.split(".")).toHaveLength(5); // a JWE, never a clearing cookie's empty value
    expect(refresh!.expires).toBeGreaterThan(Date.now() / 1000 + 29 * 24 * 3600);
    // Once the browser has dropped the access cookie (its Max-Age passed), the page's same-origin fetch is
    // refreshed from cgs_refresh and the user is still signed in, with a new access cookie.
    await context.clearCookies({ name: "cgs_session" });
    await page.reload();
    await page.locator("#identity", { hasText: "Signed in" }).waitFor();
    expect(await page.textContent("#identity")).toBe(`Signed in as ${user.email}`);
    const renewed = (await context.cookies(base)).find((c) => c.name === "cgs_session")?.value;
    expect(renewed).toMatch(JWT);
    expect(renewed).not.toBe(session!.value);

    // The link cannot be used twice.
    await page.goto(link!);
    await page.fill("#password", "Another-pass-4x");
    await page.fill("#confirm", "Another-pass-4x");
    await page.click("#submit");
    await page.locator("#message", { hasText: "already used" }).waitFor();

    await page.goto(`${base}/account`);
    await Promise.all([page.waitForURL(`${base}/login?status=signed-out`), page.click("#signout")]);
    expect((await context.cookies(base)).filter((c) => c.name.startsWith("cgs_"))).toEqual([]);
    // The 400s the page provoked on purpose are logged by the browser; CSP refusals or script errors must not be.
    expect(consoleErrors.filter((e) => /Refused|Uncaught|Content Security Policy|404/.test(e))).toEqual([]);
    await context.close();
  }, 120_000);
});
