import { existsSync } from "node:fs";
import pino from "pino";
import { chromium, type Browser } from "playwright-core";
import { createJwtVerifier, oidcSettings, startServer } from "@cgs/shared";
import { runningInCi } from "@cgs/shared/testing/ci";
import { startTestAccounts } from "./accounts-server";
import { startAuthProxy } from "./auth-proxy-harness";
import { createGatewayApp, createGatewayUpstreamPool, loadGatewayConfig } from "@cgs/gateway";
import { closedPortUrl } from "./gateway-harness";

const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const KEYCLOAK = process.env.KEYCLOAK_URL || "http://127.0.0.1:8081";
const logger = pino({ level: "silent" });

/** `describe` when Debian's Chromium is installed; CI must have it, elsewhere the suite is skipped loudly. */
export function describeWithChromium(suite: string): jest.Describe {
  if (existsSync(CHROMIUM)) return describe;
  if (runningInCi()) {
    throw new Error(
      `Chromium is required in CI for ${suite}: ${CHROMIUM} is missing (test/peers/chromium.sh)`,
    );
  }
  console.warn(
    `\n*** SKIPPING ${suite}: ${CHROMIUM} is missing. Install it with: bash test/peers/chromium.sh ***\n`,
  );
  return describe.skip;
}

/** Debian's headless Chromium, as PEERS.md says to launch it here. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  });
}

export interface PortalBrowserHarness {
  /** The gateway's public origin, where the portal pages are served. */
  base: string;
  browser: Browser;
  close(): Promise<void>;
}

/**
 * The portal as a browser meets it: a gateway (portal pages, cookie auth) in front of the real accounts and
 * auth-proxy services on PGlite, against the real Keycloak, plus a headless Chromium.
 */
export async function startPortalBrowserHarness(name: string): Promise<PortalBrowserHarness> {
  const oidcEnv = { OIDC_ISSUER: `${KEYCLOAK}/realms/cgs`, OIDC_AUDIENCE: "cgs-api", LOG_LEVEL: "silent" };
  const accounts = await startTestAccounts({ db: "pglite", name: `${name}_accounts`, env: oidcEnv });

  // The gateway's public origin must be known before it listens: reserve a port, then bind it.
  const base = await closedPortUrl();
  const authProxy = await startAuthProxy({ db: "pglite", env: { PUBLIC_BASE_URL: base } });
  const down = await closedPortUrl();
  const config = loadGatewayConfig({
    ...oidcEnv,
    PORT: new URL(base).port,
    PUBLIC_BASE_URL: base,
    ACCOUNTS_URL: accounts.url,
    AUTH_PROXY_URL: authProxy.url,
    SESSIONS_URL: down,
    BILLING_URL: down,
  });
  const pool = createGatewayUpstreamPool(config);
  const gateway = await startServer(
    createGatewayApp({
      config,
      logger,
      verifier: createJwtVerifier(oidcSettings(config)),
      upstreamPool: pool,
    }),
    { port: config.PORT, logger, shutdownGraceMs: 500, onClose: () => pool.destroy() },
  );
  const browser = await launchChromium();
  return {
    base,
    browser,
    async close() {
      await browser.close();
      await gateway.stop();
      await authProxy.close();
      await accounts.close();
    },
  };
}
