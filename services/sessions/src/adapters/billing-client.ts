import { AppError, callInternal } from "@cgs/shared";
import { z } from "zod";

const authorizationSchema = z.object({
  authorizationId: z.string().min(1),
  holdAmount: z.number().int(),
  storage: z.object({ tier: z.string(), sizeGb: z.number().int().positive() }),
});

export type StartAuthorization = z.infer<typeof authorizationSchema>;

export type AuthorizeResult =
  { authorized: true; authorization: StartAuthorization } | { authorized: false; message: string };

export interface AuthorizeRequest {
  sessionId: string;
  ratePerMinute: number;
  currency: string;
}

export interface BillingClient {
  /** Checks the balance covers 15 minutes at the rate and places a hold (billing's start authorization). */
  authorizeStart(accessToken: string, request: AuthorizeRequest): Promise<AuthorizeResult>;
  /** Releases the hold of a start that did not happen; idempotent. */
  releaseAuthorization(accessToken: string, authorizationId: string): Promise<void>;
}

export function createBillingClient(settings: { baseUrl: string; timeoutMs: number }): BillingClient {
  return {
    async authorizeStart(accessToken, request) {
      const res = await callInternal("billing", `${settings.baseUrl}/internal/v1/start-authorizations`, {
        method: "POST",
        token: accessToken,
        body: request,
        timeoutMs: settings.timeoutMs,
      });
      if (res.status === 402) {
        const message = (res.body as { message?: unknown } | undefined)?.message;
        return {
          authorized: false,
          message: typeof message === "string" ? message : "The balance does not cover 15 minutes of play",
        };
      }
      const { error, message } = (res.body as { error?: unknown; message?: unknown } | undefined) ?? {};
      if (res.status === 409 && error === "ACCOUNT_PENDING_DELETION") {
        throw new AppError("ACCOUNT_PENDING_DELETION", "The account is scheduled for deletion");
      }
      // The player's own spending limit: billing's message names it and says when it resets.
      if (res.status === 409 && error === "SPEND_LIMIT_REACHED") {
        throw new AppError(
          "SPEND_LIMIT_REACHED",
          typeof message === "string" ? message : "A spending limit of this account is reached",
        );
      }
      const parsed = authorizationSchema.safeParse(res.body);
      if (res.status !== 200 || !parsed.success) {
        throw AppError.unavailable("The billing service gave an unexpected answer, try again shortly");
      }
      return { authorized: true, authorization: parsed.data };
    },
    async releaseAuthorization(accessToken, authorizationId) {
      const res = await callInternal(
        "billing",
        `${settings.baseUrl}/internal/v1/start-authorizations/${encodeURIComponent(authorizationId)}/release`,
        { method: "POST", token: accessToken, timeoutMs: settings.timeoutMs },
      );
      if (res.status !== 204 && res.status !== 200 && res.status !== 404) {
        throw new Error(`billing answered ${res.status} to a hold release`);
      }
    },
  };
}
