import { createClient, DEFAULT_BASE_URL, isExpired, type Client, type Session } from "@cgs/sdk";
import { SignedOutError } from "./cli-errors";
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
  /** An SDK client signed in as the profile; refreshes write the rotated pair back under the file lock. */
  client(): Client;
  /** An SDK client without credentials (discovery, sign-in). */
  anonymousClient(): Client;
}

const trim = (url: string) => url.replace(/\/+$/, "");

export function createContext(options: GlobalOptions, env: NodeJS.ProcessEnv = process.env): CliContext {
  const store = new CredentialsStore();
  const baseUrl = () =>
    trim(options.baseUrl || env.SERVICE_BASE_URL || store.read(options.profile)?.baseUrl || DEFAULT_BASE_URL);

  const signedIn = (): ProfileCredentials => {
    const credentials = store.read(options.profile);
    if (!credentials) {
      const which = options.profile === "default" ? "" : ` --profile ${options.profile}`;
      throw new SignedOutError(`Not signed in. Run \`cgs login${which}\` first.`);
    }
    return credentials;
  };

  return {
    options,
    store,
    baseUrl,
    anonymousClient: () => createClient({ baseUrl: baseUrl() }),
    client() {
      const credentials = signedIn();
      if (!credentials.refreshToken)
        return createClient({ baseUrl: baseUrl(), apiKey: credentials.accessToken });
      return createClient({
        baseUrl: baseUrl(),
        session: { accessToken: credentials.accessToken, refreshToken: credentials.refreshToken },
        // Another cgs process may have rotated the pair already: under the lock, re-read the file and refresh
        // only if what it holds is still the pair we have, or has expired too.
        refreshRunner: (current, refresh) =>
          store.update(options.profile, async (stored) => {
            if (!stored?.refreshToken)
              throw new SignedOutError("Signed out meanwhile. Run `cgs login` to sign in again.");
            const rotatedElsewhere =
              stored.accessToken !== current.accessToken && !isExpired(stored.accessToken);
            const pair: Session = rotatedElsewhere
              ? { accessToken: stored.accessToken, refreshToken: stored.refreshToken }
              : await refresh({ accessToken: stored.accessToken, refreshToken: stored.refreshToken });
            return { next: { ...stored, ...pair }, result: pair };
          }),
      });
    },
  };
}
