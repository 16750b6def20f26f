import {
  assertSecureUrl,
  createClient,
  decodeJwt,
  DEFAULT_BASE_URL,
  isExpired,
  originOf,
  type Client,
  type Session,
} from "@cgs/sdk";
import { SignedOutError, UsageError } from "./cli-errors";
import { CredentialsStore, type ProfileCredentials } from "./credentials-store";

export interface GlobalOptions {
  baseUrl?: string;
  profile: string;
  json?: boolean;
}

export interface CliContext {
  options: GlobalOptions;
  store: CredentialsStore;
  /** The API origin: --base-url, then SERVICE_BASE_URL, then the profile's, then the production default. */
  baseUrl(): string;
  /**
   * An SDK client signed in as the profile, on the profile's own origin (another origin named by --base-url or
   * SERVICE_BASE_URL is refused before anything is sent); refreshes write the rotated pair back under the lock.
   */
  client(): Client;
  /** An SDK client without credentials (discovery, sign-in). */
  anonymousClient(): Client;
}

const trim = (url: string) => url.replace(/\/+$/, "");

function secureBaseUrl(url: string, source: string): string {
  try {
    assertSecureUrl(url, `The API base URL (${source})`);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  return trim(url);
}

export function createContext(options: GlobalOptions, env: NodeJS.ProcessEnv = process.env): CliContext {
  const store = new CredentialsStore();
  const override = options.baseUrl
    ? { url: options.baseUrl, source: "--base-url" }
    : env.SERVICE_BASE_URL
      ? { url: env.SERVICE_BASE_URL, source: "SERVICE_BASE_URL" }
      : undefined;
  const baseUrl = () => {
    if (override) return secureBaseUrl(override.url, override.source);
    const stored = store.read(options.profile)?.baseUrl;
    return secureBaseUrl(stored ?? DEFAULT_BASE_URL, stored ? `profile ${options.profile}` : "default");
  };

  const signedIn = (): ProfileCredentials => {
    const credentials = store.read(options.profile);
    if (!credentials) {
      const which = options.profile === "default" ? "" : ` --profile ${options.profile}`;
      throw new SignedOutError(`Not signed in. Run \`cgs login${which}\` first.`);
    }
    return credentials;
  };

  /** The profile's tokens go only to the origin they were issued for. */
  const profileOrigin = (credentials: ProfileCredentials): string => {
    const own = secureBaseUrl(credentials.baseUrl, `profile ${options.profile}`);
    if (!override) return own;
    const wanted = secureBaseUrl(override.url, override.source);
    if (originOf(wanted) === originOf(own)) return own;
    const profile = options.profile === "default" ? "" : ` --profile ${options.profile}`;
    throw new SignedOutError(
      [
        `The profile "${options.profile}" is signed in to ${originOf(own)}, but ${override.source} names ${originOf(wanted)}.`,
        "Its tokens go only to the origin they were issued for, so nothing was sent.",
        `To use ${originOf(wanted)}, sign in there: \`cgs login --base-url ${wanted} --profile NAME\`, then add --profile NAME.`,
        `To use ${originOf(own)}, drop ${override.source === "--base-url" ? "--base-url" : "SERVICE_BASE_URL (unset it)"}${profile ? ` and keep${profile}` : ""}.`,
      ].join("\n"),
    );
  };

  return {
    options,
    store,
    baseUrl,
    anonymousClient: () => createClient({ baseUrl: baseUrl() }),
    client() {
      const credentials = signedIn();
      const origin = profileOrigin(credentials);
      if (!credentials.refreshToken)
        return createClient({ baseUrl: origin, apiKey: credentials.accessToken });
      return createClient({
        baseUrl: origin,
        // Refreshes go to the identity provider recorded at login (older profiles: their token's `iss`).
        issuer: credentials.issuer,
        session: { accessToken: credentials.accessToken, refreshToken: credentials.refreshToken },
        // Another cgs process may have rotated the pair already: under the lock, re-read the file and refresh
        // only if what it holds is still the pair we have, or has expired too.
        refreshRunner: (current, refresh) =>
          store.update(options.profile, async (stored) => {
            if (!stored?.refreshToken)
              throw new SignedOutError("Signed out meanwhile. Run `cgs login` to sign in again.");
            if (stored.baseUrl !== credentials.baseUrl || stored.issuer !== credentials.issuer)
              throw new SignedOutError(
                "The profile was signed in elsewhere meanwhile. Run the command again.",
              );
            const rotatedElsewhere =
              stored.accessToken !== current.accessToken && !isExpired(stored.accessToken);
            const pair: Session = rotatedElsewhere
              ? { accessToken: stored.accessToken, refreshToken: stored.refreshToken }
              : await refresh({ accessToken: stored.accessToken, refreshToken: stored.refreshToken });
            // A profile saved by an older cgs records its issuer now (its token's `iss`, where it refreshed).
            const issuer = stored.issuer ?? decodeJwt(stored.accessToken)?.iss;
            return { next: { ...stored, ...(issuer ? { issuer } : {}), ...pair }, result: pair };
          }),
      });
    },
  };
}
