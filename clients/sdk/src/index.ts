export {
  createClient,
  DEFAULT_BASE_URL,
  type AccountDeletion,
  type AutoRecharge,
  type AutoRechargePatch,
  type CardSetupCheckout,
  type Client,
  type ClientOptions,
  type ConnectInfo,
  type CreditBalance,
  type Device,
  type Identity,
  type PairingPin,
  type Preferences,
  type PreferencesPatch,
  type QueuePlace,
  type Recharge,
  type Region,
  type SavedCard,
  type SessionStatus,
  type SessionWarning,
  type StopReason,
  type SpendLimits,
  type SpendLimitsPatch,
  type StartSessionRequest,
  type StorageBilling,
  type TopupCheckout,
  type VpnKey,
  type WaitOptions,
} from "./client";
export { discoverAuthorizationServer, discoverIssuer, type AuthorizationServer } from "./discovery";
export { ApiError, SessionExpiredError } from "./errors";
export { decodeJwt, isExpired, type JwtClaims } from "./jwt";
export {
  byRoundTrip,
  DEFAULT_MEASURE_SAMPLES,
  DEFAULT_PROBE_TIMEOUT_MS,
  measureBeacon,
  measureRegions,
  median,
  roundTripsById,
  type BeaconRegion,
  type MeasuredRegion,
  type MeasureOptions,
} from "./region-latency";
export { assertSecureUrl, originOf } from "./secure-url";
export { refreshSession, type RefreshRunner, type Session } from "./session-tokens";
export type { RetryOptions } from "./transport";
export type { components, paths } from "./generated/openapi";
