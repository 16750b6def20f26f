import type { GatewayConfig } from "../config";

/** Development-only default; production must set PORTAL_COOKIE_SECRET. */
export const LOCAL_PORTAL_COOKIE_SECRET = "cgs-local-portal-cookie-secret-change-me";

export function portalCookieSecret(config: Pick<GatewayConfig, "NODE_ENV" | "PORTAL_COOKIE_SECRET">): string {
  if (config.PORTAL_COOKIE_SECRET) return config.PORTAL_COOKIE_SECRET;
  if (config.NODE_ENV === "production") throw new Error("PORTAL_COOKIE_SECRET is required in production");
  return LOCAL_PORTAL_COOKIE_SECRET;
}
