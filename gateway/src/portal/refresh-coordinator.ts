import { createHash, hkdfSync } from "node:crypto";
import { CompactEncrypt, compactDecrypt } from "jose";
import type { Logger } from "pino";
import type { RedisCommandSender } from "../http/rate-limit-middleware";
import { withTimeout } from "../http/redis-rate-limit-store";
import { RefreshRejectedError, type OidcTokens } from "./oidc-login";

/**
 * Refresh tokens rotate on every use and a used one is refused, so two gateway replicas refreshing the same
 * browser session at once would sign it out. The coordinator lets one replica call the token endpoint per
 * refresh token; the others wait for its result in Redis and set the same cookies.
 */
export interface RefreshCoordinator {
  /**
   * Runs `refresh` at most once across replicas for this refresh token; throws what the winner's refresh threw.
   * Another replica's new tokens are handed only to the same client within the in-flight grace (mayShare), else
   * RefreshReplayRefused.
   */
  run(refreshToken: string, client: string, refresh: () => Promise<OidcTokens>): Promise<OidcTokens>;
}

/**
 * How long after a refresh finished its new tokens still go to requests carrying the old refresh cookie: those
 * the same browser sent before the first answer's Set-Cookie reached it. Seconds, not the 30 s it once was.
 */
export const IN_FLIGHT_GRACE_MS = 10_000;

/** A request with an already-rotated refresh cookie that is not one of the refreshing browser's own in flight. */
export class RefreshReplayRefused extends Error {}

/**
 * Whether a finished refresh's tokens may go to this request: only to the client that refreshed (its address and
 * user agent, see clientOf in session-refresh.ts), and only while its other requests can still be in flight. An
 * old cookie replayed from elsewhere, or later, gets nothing.
 */
export function mayShare(
  finished: { client: string; finishedAt: number },
  client: string,
  now = Date.now(),
): boolean {
  return finished.client === client && now - finished.finishedAt <= IN_FLIGHT_GRACE_MS;
}

export interface RedisRefreshCoordinatorOptions {
  redis: RedisCommandSender;
  /** The portal cookie secret: results are stored encrypted under a key derived from it. */
  secret: string;
  logger: Logger;
  /** How long the winner holds the lock: longer than one token-endpoint call (5 s timeout). */
  lockMs?: number;
  /**
   * How long a finished result stays in Redis: requests with the old refresh token then learn it was used (and are
   * refused unless mayShare) instead of spending it again at the identity provider.
   */
  resultMs?: number;
  /** Bound on every Redis command: a hung Redis must not hold a request. */
  commandTimeoutMs?: number;
  pollMs?: number;
}

type StoredResult =
  | { kind: "tokens"; tokens: OidcTokens; client: string; finishedAt: number }
  | { kind: "rejected"; reason: string };

const KEY_PREFIX = "cgs:portal-refresh:";

class RedisUnavailable extends Error {}

/** Without Redis (a single replica) the per-process single flight in session-refresh.ts is enough. */
export const localRefreshCoordinator: RefreshCoordinator = { run: (_token, _client, refresh) => refresh() };

export function createRedisRefreshCoordinator(options: RedisRefreshCoordinatorOptions): RefreshCoordinator {
  const lockMs = options.lockMs ?? 15_000;
  const resultMs = options.resultMs ?? 30_000;
  const commandTimeoutMs = options.commandTimeoutMs ?? 500;
  const pollMs = options.pollMs ?? 50;
  const key = new Uint8Array(hkdfSync("sha256", options.secret, "cgs-portal", "refresh result A256GCM", 32));

  // A sender that throws instead of rejecting counts as unavailable too.
  const command = (args: string[]): Promise<unknown> =>
    withTimeout(
      Promise.resolve().then(() => options.redis.sendCommand(args)),
      commandTimeoutMs,
    ).catch((err: unknown) => {
      throw new RedisUnavailable(err instanceof Error ? err.message : String(err));
    });

  const seal = (result: StoredResult) =>
    new CompactEncrypt(new TextEncoder().encode(JSON.stringify(result)))
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .encrypt(key);
  const open = async (value: string): Promise<StoredResult> => {
    const { plaintext } = await compactDecrypt(value, key, {
      keyManagementAlgorithms: ["dir"],
      contentEncryptionAlgorithms: ["A256GCM"],
    });
    return JSON.parse(new TextDecoder().decode(plaintext)) as StoredResult;
  };
  const unpack = (result: StoredResult, client: string): OidcTokens => {
    if (result.kind === "rejected") throw new RefreshRejectedError(result.reason);
    if (!mayShare(result, client)) throw new RefreshReplayRefused("refresh cookie replayed");
    return result.tokens;
  };

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  const lead = async (
    id: string,
    client: string,
    refresh: () => Promise<OidcTokens>,
  ): Promise<OidcTokens> => {
    let result: StoredResult;
    try {
      result = { kind: "tokens", tokens: await refresh(), client, finishedAt: Date.now() };
    } catch (err) {
      if (!(err instanceof RefreshRejectedError)) {
        // Unreachable provider: free the lock so the next request may try again at once.
        await command(["DEL", `${KEY_PREFIX}${id}:lock`]).catch(() => undefined);
        throw err;
      }
      result = { kind: "rejected", reason: err.message };
    }
    await command(["SET", `${KEY_PREFIX}${id}:result`, await seal(result), "PX", String(resultMs)]).catch(
      (err: unknown) => options.logger.warn({ err }, "could not share a browser refresh result"),
    );
    return unpack(result, client);
  };

  return {
    async run(refreshToken, client, refresh) {
      const id = createHash("sha256").update(refreshToken).digest("base64url");
      try {
        const deadline = Date.now() + lockMs;
        for (;;) {
          const stored = await command(["GET", `${KEY_PREFIX}${id}:result`]);
          if (typeof stored === "string") return unpack(await open(stored), client);
          const won = await command(["SET", `${KEY_PREFIX}${id}:lock`, "1", "NX", "PX", String(lockMs)]);
          if (won === "OK") return await lead(id, client, refresh);
          if (Date.now() > deadline)
            throw new Error("another gateway's browser refresh did not finish in time");
          await sleep(pollMs);
        }
      } catch (err) {
        if (!(err instanceof RedisUnavailable)) throw err;
        // Redis is down or hung: refresh here; a race with another replica can then sign the browser out.
        options.logger.warn({ err }, "redis unavailable: browser refresh not coordinated across replicas");
        return refresh();
      }
    },
  };
}
