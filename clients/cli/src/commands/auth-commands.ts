import { Command } from "commander";
import { decodeJwt, discoverAuthorizationServer, discoverIssuer, isExpired } from "@cgs/sdk";
import { SignedOutError, UsageError } from "../cli-errors";
import { pollForTokens, requestDeviceCode, revokeToken } from "../device-login";
import { emit, note, openInBrowser, readStdin } from "../terminal-output";
import { action } from "./command-action";

function parsePastedToken(text: string): { accessToken: string; refreshToken?: string } {
  const trimmed = text.trim();
  if (!trimmed)
    throw new UsageError("no token on standard input (pipe an access token or {accessToken, refreshToken})");
  if (trimmed.startsWith("{")) {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(trimmed) as Record<string, unknown>;
    } catch {
      throw new UsageError("standard input is not valid JSON");
    }
    if (typeof parsed.accessToken !== "string")
      throw new UsageError("accessToken is missing from the JSON on standard input");
    if (parsed.refreshToken !== undefined && typeof parsed.refreshToken !== "string") {
      throw new UsageError("refreshToken must be a string");
    }
    return { accessToken: parsed.accessToken, refreshToken: parsed.refreshToken as string | undefined };
  }
  if (trimmed.split(".").length !== 3 || /\s/.test(trimmed))
    throw new UsageError("standard input is not a JWT access token");
  return { accessToken: trimmed };
}

export function authCommands(program: Command): void {
  program
    .command("login")
    .description("Sign in with your browser (device sign-in); second factors are asked on the sign-in page")
    .option("--no-browser", "print the sign-in address without opening a browser")
    .option("--with-token", "read an access token, or JSON {accessToken, refreshToken}, from standard input")
    .action(
      action(async (ctx, opts: { browser: boolean; withToken?: boolean }) => {
        const baseUrl = ctx.baseUrl();
        let credentials: { accessToken: string; refreshToken?: string };
        let issuer: string | undefined;
        if (opts.withToken) {
          credentials = parsePastedToken(await readStdin());
          // The API checks the token below; its `iss` is then the identity provider that origin trusts.
          issuer = decodeJwt(credentials.accessToken)?.iss;
        } else {
          const server = await discoverAuthorizationServer(baseUrl, fetch);
          const device = await requestDeviceCode(server);
          const url = device.verificationUriComplete ?? device.verificationUri;
          note(
            `To sign in, open this address in a browser:\n\n  ${url}\n\nand check that it shows the code ${device.userCode}`,
          );
          if (opts.browser) openInBrowser(url);
          note("Waiting for you to approve the sign-in...");
          credentials = await pollForTokens(server, device);
          issuer = server.issuer;
        }
        // Check the token against the API before keeping it.
        const identity = await ctx.anonymousClient().raw.GET("/api/v1/session", {
          headers: { authorization: `Bearer ${credentials.accessToken}` },
        });
        if (!identity.data)
          throw new SignedOutError("The token was refused by the API. Run `cgs login` again.");
        await ctx.store.update(ctx.options.profile, async () => ({
          next: { baseUrl, ...(issuer ? { issuer } : {}), ...credentials },
          result: undefined,
        }));
        emit(ctx.options.json, identity.data, () => {
          const who = identity.data.email ?? identity.data.identityUserId;
          const profile = ctx.options.profile === "default" ? "" : ` (profile ${ctx.options.profile})`;
          const refresh = credentials.refreshToken
            ? ""
            : "\nNo refresh token: run `cgs login` again when this token expires.";
          return `Signed in to ${baseUrl} as ${who}${profile}.${refresh}`;
        });
      }),
    );

  program
    .command("logout")
    .description("Revoke the refresh token at the identity provider and forget the credentials")
    .action(
      action(async (ctx) => {
        const stored = ctx.store.read(ctx.options.profile);
        if (!stored) {
          note("Not signed in.");
          return;
        }
        // Revoked where it was issued (older profiles: their token's `iss`), never at an issuer another origin names.
        const issuer = stored.issuer ?? decodeJwt(stored.accessToken)?.iss;
        if (stored.refreshToken && issuer) {
          const clientId = decodeJwt(stored.accessToken)?.azp ?? "cgs-cli";
          await revokeToken(await discoverIssuer(issuer, fetch), stored.refreshToken, clientId);
        }
        await ctx.store.update(ctx.options.profile, async () => ({ next: null, result: undefined }));
        emit(ctx.options.json, { signedOut: true }, () => "Signed out.");
      }),
    );

  program
    .command("whoami")
    .description("Show who you are signed in as")
    .action(
      action(async (ctx) => {
        const me = await ctx.client().account.identity();
        emit(ctx.options.json, me, () =>
          [
            `${me.email ?? "(no e-mail shared)"} (user ${me.identityUserId})`,
            `API: ${ctx.baseUrl()}`,
            `Token expires: ${me.expiresAt}`,
            ...(me.deletion ? [`Account deletion scheduled: purged at ${me.deletion.purgeAt}`] : []),
          ].join("\n"),
        );
      }),
    );

  program
    .command("token")
    .description("Print a valid access token (refreshing it if needed), e.g. for curl")
    .action(
      action(async (ctx) => {
        const token = await ctx.client().accessToken();
        if (!token || isExpired(token, 0))
          throw new SignedOutError("The saved token has expired. Run `cgs login` again.");
        process.stdout.write(`${token}\n`);
      }),
    );
}
