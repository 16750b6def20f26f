import type { Browser, Page } from "playwright-core";
import {
  createTestUser,
  keycloakAdmin,
  totpCode,
  uniqueEmail,
  type TestUser,
} from "@cgs/shared/testing/keycloak";
import { waitForMail } from "@cgs/shared/testing/mail";
import {
  describeWithChromium,
  startPortalBrowserHarness,
  type PortalBrowserHarness,
} from "../../test/harnesses/portal-browser-harness";

describeWithChromium("the portal MFA browser test")(
  "portal sign-in with a second factor after a password reset (spec §4.5 rule 8)",
  () => {
    let portal: PortalBrowserHarness;
    let browser: Browser;
    let base: string;
    const users: TestUser[] = [];

    beforeAll(async () => {
      portal = await startPortalBrowserHarness("portal_mfa");
      ({ browser, base } = portal);
    }, 120_000);

    afterAll(async () => {
      for (const user of users) await user.remove();
      await portal?.close();
    });

    /** Starts a sign-in from the portal's /login in a fresh browser context (no Keycloak SSO cookie). */
    async function startSignIn(email: string, password: string): Promise<Page> {
      const context = await browser.newContext();
      context.setDefaultTimeout(15_000);
      const page = await context.newPage();
      await page.goto(`${base}/login`);
      await Promise.all([
        page.waitForURL(/\/realms\/cgs\/protocol\/openid-connect\/auth/),
        page.click("#signin"),
      ]);
      await page.fill("#username", email);
      await page.fill("#password", password);
      await page.click("#kc-login");
      return page;
    }

    async function resetPassword(email: string, newPassword: string): Promise<void> {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(`${base}/forgot-password`);
      await page.fill("#email", email);
      await page.click("#submit");
      await page.waitForSelector("#message.success");
      const mail = await waitForMail(email, { timeoutMs: 20_000 });
      const link = /(http:\/\/127\.0\.0\.1:\d+\/reset-password\?token=[A-Za-z0-9_.-]+)/.exec(mail.Text)?.[1];
      expect(link?.startsWith(`${base}/reset-password?token=`)).toBe(true);
      await page.goto(link!);
      await page.fill("#password", newPassword);
      await page.fill("#confirm", newPassword);
      await Promise.all([page.waitForURL(`${base}/login?status=password-updated`), page.click("#submit")]);
      await context.close();
    }

    /** Reads the "Recovery code #N" prompt and returns code N from the list the user saved (1-based). */
    async function answerRecoveryPrompt(page: Page, codes: string[]): Promise<string> {
      await page.waitForSelector("#recoveryCodeInput");
      const label = (await page.textContent("label[for=recoveryCodeInput]")) ?? "";
      const n = Number(/#\s*(\d+)/.exec(label)?.[1] ?? "1");
      const code = codes[n - 1]!;
      await page.fill("#recoveryCodeInput", code);
      return code;
    }

    /** From the OTP page, "Try another way" and pick the recovery codes (Keycloak's select-authenticator page). */
    async function chooseRecoveryCodes(page: Page): Promise<void> {
      await page.click("#try-another-way");
      await page
        .getByText(/recovery/i)
        .first()
        .click();
    }

    it("when a user with TOTP and recovery codes resets the password, then the next sign-in still asks for the second factor and one recovery code signs in, once", async () => {
      const user = await createTestUser(uniqueEmail("mfa-codes"), {
        password: "Original-pass-1",
        totp: true,
      });
      users.push(user);
      await keycloakAdmin("PUT", `/users/${user.id}`, {
        requiredActions: ["CONFIGURE_RECOVERY_AUTHN_CODES"],
      });

      // First sign-in: password and TOTP, then Keycloak makes the user set up recovery codes, as a real user does.
      let page = await startSignIn(user.email, "Original-pass-1");
      await page.waitForSelector("#otp");
      await page.fill("#otp", totpCode(user.totpSecret!));
      await page.click("#kc-login");
      await page.waitForSelector("#kc-recovery-codes-list");
      const codes = (await page.locator("#kc-recovery-codes-list li").allTextContents()).map((c) => c.trim());
      expect(codes.length).toBeGreaterThanOrEqual(10);
      await page.check("#kcRecoveryCodesConfirmationCheck");
      await Promise.all([page.waitForURL(`${base}/`), page.click("#saveRecoveryAuthnCodesBtn")]);
      await page.context().close();

      await resetPassword(user.email, "Brand-new-pass-2");

      // The new password alone is not enough: the second factor is still asked for; the phone is "lost",
      // so the user takes a recovery code instead.
      page = await startSignIn(user.email, "Brand-new-pass-2");
      await page.waitForSelector("#otp");
      expect(page.url().startsWith(base)).toBe(false);
      await chooseRecoveryCodes(page);
      const used = await answerRecoveryPrompt(page, codes);
      // Sign-in lands on the play page; the account page shows who is signed in.
      await Promise.all([page.waitForURL(`${base}/`), page.click("#kc-login")]);
      await page.goto(`${base}/account`);
      await page.locator("#identity", { hasText: "Signed in" }).waitFor();
      expect(await page.textContent("#identity")).toBe(`Signed in as ${user.email}`);
      const session = (await page.context().cookies(base)).find((c) => c.name === "cgs_session");
      expect(session).toMatchObject({
        httpOnly: true,
        value: expect.stringMatching(/^eyJ[\w-]+\.[\w-]+\.[\w-]+$/),
      });
      await page.context().close();

      // The same code cannot be used twice.
      page = await startSignIn(user.email, "Brand-new-pass-2");
      await page.waitForSelector("#otp");
      await chooseRecoveryCodes(page);
      await page.waitForSelector("#recoveryCodeInput");
      await page.fill("#recoveryCodeInput", used);
      await page.click("#kc-login");
      await page
        .locator("#input-error-recoveryCodeInput", { hasText: "Invalid recovery authentication code" })
        .waitFor();
      expect(page.url().startsWith(base)).toBe(false);
      expect((await page.context().cookies(base)).find((c) => c.name === "cgs_session")).toBeUndefined();
      await page.context().close();
    }, 120_000);

    it("when a user whose only second factor is recovery codes resets the password, then the password alone does not sign in", async () => {
      const user = await createTestUser(uniqueEmail("mfa-codes-only"), { password: "Original-pass-1" });
      users.push(user);
      await keycloakAdmin("PUT", `/users/${user.id}`, {
        requiredActions: ["CONFIGURE_RECOVERY_AUTHN_CODES"],
      });
      let page = await startSignIn(user.email, "Original-pass-1");
      await page.waitForSelector("#kc-recovery-codes-list");
      const codes = (await page.locator("#kc-recovery-codes-list li").allTextContents()).map((c) => c.trim());
      await page.check("#kcRecoveryCodesConfirmationCheck");
      await Promise.all([page.waitForURL(`${base}/`), page.click("#saveRecoveryAuthnCodesBtn")]);
      await page.context().close();

      await resetPassword(user.email, "Brand-new-pass-2");

      page = await startSignIn(user.email, "Brand-new-pass-2");
      // Either Keycloak asks for a recovery code, or (the failure) the password alone reached the portal.
      await Promise.race([
        page.waitForSelector("#recoveryCodeInput").catch(() => undefined),
        page.waitForURL(`${base}/**`).catch(() => undefined),
      ]);
      expect(page.url().startsWith(base)).toBe(false);
      await answerRecoveryPrompt(page, codes);
      // Sign-in lands on the play page; the account page shows who is signed in.
      await Promise.all([page.waitForURL(`${base}/`), page.click("#kc-login")]);
      await page.goto(`${base}/account`);
      await page.locator("#identity", { hasText: "Signed in" }).waitFor();
      await page.context().close();
    }, 120_000);
  },
);
