import { spawnSync } from "node:child_process";
import { waitUntil } from "@cgs/shared/testing/queue";
import { fastJourneyEnv, launchPlatform, repoRoot, type LaunchedPlatform } from "../platform/launch-platform";
import type { Client } from "@cgs/sdk";

/** `npm start` on the given ports with a fast simulator, short rate-limit windows and 1 s capacity back-off. */
export function launchClientPlatform(
  gatewayPort: number,
  env: Record<string, string> = {},
): Promise<LaunchedPlatform> {
  return launchPlatform({
    gatewayPort,
    servicePortBase: gatewayPort + 1,
    env: {
      ...fastJourneyEnv(`clients-${gatewayPort}-${Date.now()}-`),
      CLOUD_CAPACITY_RETRY_AFTER_SECONDS: "1",
      ...env,
    },
  });
}

/** `npm run token -- --session EMAIL`: a real Keycloak pair through the local-only cgs-test client. */
export function localSession(email: string): { accessToken: string; refreshToken: string } {
  const result = spawnSync(process.execPath, ["test/platform/token.mjs", "--session", email], {
    cwd: repoRoot,
    encoding: "utf8",
  });
  if (result.status !== 0) throw new Error(`token command failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as { accessToken: string; refreshToken: string };
}

/** The same claims with `exp` in the past and a signature nobody made: only a refresh can make it useful. */
export function expiredCopy(accessToken: string, expOffsetSeconds = -60): string {
  const [header, payload] = accessToken.split(".");
  const claims = JSON.parse(Buffer.from(payload!, "base64url").toString("utf8")) as Record<string, unknown>;
  claims.exp = Math.floor(Date.now() / 1000) + expOffsetSeconds;
  return `${header}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.c2lnbmF0dXJl`;
}

/** Tops up through the local checkout page and waits for the credit, so sessions can start. */
export async function fundAccount(client: Client, amount = 2000): Promise<void> {
  const checkout = await client.credits.topup(amount);
  const paid = await fetch(`${checkout.checkoutUrl}/pay`, { method: "POST", redirect: "manual" });
  if (paid.status !== 303) throw new Error(`checkout payment answered ${paid.status}`);
  await waitUntil(async () => ((await client.credits.me()).balance > 0 ? true : undefined), {
    timeoutMs: 15_000,
    description: "the top-up credited",
  });
}

/** A fetch that records every URL it is asked for (to count token-endpoint and API calls). */
export function recordingFetch(): {
  fetch: typeof fetch;
  calls: { url: string; method: string; status: number }[];
} {
  const calls: { url: string; method: string; status: number }[] = [];
  return {
    calls,
    fetch: async (input, init) => {
      const request = new Request(input, init);
      const call = { url: request.url, method: request.method, status: 0 };
      calls.push(call);
      const res = await globalThis.fetch(request);
      call.status = res.status;
      return res;
    },
  };
}
