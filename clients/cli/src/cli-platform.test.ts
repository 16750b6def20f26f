import { spawnSync } from "node:child_process";
import http from "node:http";
import { mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium, type Browser } from "playwright-core";
import {
  createTestUser,
  refreshGrant,
  totpCode,
  uniqueEmail,
  type TestUser,
} from "@cgs/shared/testing/keycloak";
import { listenLocally } from "@cgs/shared/testing/ports";
import { repoRoot, type LaunchedPlatform } from "../../../test/platform/launch-platform";
import { describeWithChromium } from "../../../test/harnesses/portal-browser-harness";
import { createClient } from "@cgs/sdk";
import {
  expiredCopy,
  fundAccount,
  launchClientPlatform,
  localSession,
} from "../../../test/harnesses/client-platform";
import { startRecordingListener, type RecordingListener } from "@cgs/shared/testing/recording-listener";
import { cgsEnv, runCgs, spawnCgs } from "../../../test/harnesses/run-cgs";

// The built `cgs` binary as a person runs it, against `npm start` on ports 18590-18594 and the real Keycloak.
// Run under `flock /tmp/cgs-platform.lock`.
let platform: LaunchedPlatform;
let browser: Browser;
const users: TestUser[] = [];
const KEYCLOAK_ISSUER = "http://127.0.0.1:8081/realms/cgs";
const KEYCLOAK_TOKEN = `${KEYCLOAK_ISSUER}/protocol/openid-connect/token`;

// Two simulated regions, the far one configured first: only a measurement puts the near one first.
const REGIONS = JSON.stringify([
  { id: "us-east-1", name: "US East (N. Virginia)", simulator: { latencyMs: 120 } },
  { id: "eu-west-1", name: "Europe (Ireland)", simulator: { latencyMs: 15 } },
]);

beforeAll(async () => {
  platform = await launchClientPlatform(18590, {
    REGIONS,
  });
}, 180_000);

/** Every simulated region full (or not), or only `region`. */
const setCapacityExhausted = async (exhausted: boolean, region?: string) => {
  const res = await fetch(`http://127.0.0.1:${platform.servicePorts[0]}/internal/v1/simulator/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ capacityExhausted: exhausted, ...(region ? { region } : {}) }),
  });
  expect(res.ok).toBe(true);
};

/** Resolves once `pattern` shows up in what the child wrote to stderr so far. */
const stderrShows = (child: ReturnType<typeof spawnCgs>, pattern: RegExp, seen: { text: string }) =>
  new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`stderr never showed ${pattern}:\n${seen.text}`)),
      30_000,
    );
    const check = () => {
      if (!pattern.test(seen.text)) return;
      clearTimeout(timer);
      child.stderr.off("data", check);
      resolve();
    };
    child.stderr.on("data", check);
    check();
  });
afterAll(async () => {
  for (const user of users) await user.remove();
  await platform?.cleanup();
});

const freshHome = () => mkdtempSync(path.join(os.tmpdir(), "cgs-home-"));
const credentialsOf = (home: string) =>
  JSON.parse(readFileSync(path.join(home, "cgs", "credentials.json"), "utf8")) as {
    profiles: Record<
      string,
      { baseUrl: string; issuer?: string; accessToken: string; refreshToken?: string }
    >;
  };

/** Signs in with --with-token from a local session pair; returns the config home. */
async function signedInHome(email: string): Promise<string> {
  const home = freshHome();
  const login = await runCgs(
    ["--base-url", platform.base, "login", "--with-token"],
    cgsEnv(home),
    JSON.stringify(localSession(email)),
  );
  expect(login.code).toBe(0);
  return home;
}

const refreshWithCli = (refreshToken: string) =>
  fetch(KEYCLOAK_TOKEN, {
    method: "POST",
    body: new URLSearchParams({
      grant_type: "refresh_token",
      client_id: "cgs-cli",
      refresh_token: refreshToken,
    }),
  });

describeWithChromium("cgs login in Chromium")("cgs login (device sign-in)", () => {
  beforeAll(async () => {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
      ],
    });
  });
  afterAll(() => browser?.close());

  async function deviceLogin(
    user: TestUser,
    home: string,
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const child = spawnCgs(["--base-url", platform.base, "login", "--no-browser"], cgsEnv(home));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on("close", resolve));
    const deadline = Date.now() + 15_000;
    while (!/https?:\/\/\S+user_code=\S+/.test(stderr)) {
      if (Date.now() > deadline) throw new Error(`no sign-in address printed:\n${stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const url = /(https?:\/\/\S+user_code=\S+)/.exec(stderr)![1]!;
    const userCode = new URL(url).searchParams.get("user_code")!;
    expect(stderr).toContain(`the code ${userCode}`);

    const context = await browser.newContext();
    context.setDefaultTimeout(15_000);
    const page = await context.newPage();
    await page.goto(url);
    await page.fill("#username", user.email);
    await page.fill("#password", user.password!);
    await page.click("#kc-login");
    if (user.totpSecret) {
      await page.waitForSelector("#otp");
      await page.fill("#otp", totpCode(user.totpSecret));
      await page.click("#kc-login");
    }
    await page.getByText("Do you grant these access privileges?").waitFor();
    await page.click("#kc-login");
    await page.getByText(/device login successful/i).waitFor();
    await context.close();
    return { code: await exited, stdout, stderr };
  }

  test.each([
    ["a password", false],
    ["a password and TOTP", true],
  ])(
    "when a user with %s approves the code in the browser, then cgs is signed in with a private credentials file",
    async (_label, totp) => {
      const user = await createTestUser(uniqueEmail("cli-device"), { password: "Device-pass-123", totp });
      users.push(user);
      const home = freshHome();
      const login = await deviceLogin(user, home);
      expect(login.stderr).toContain("Waiting for you to approve the sign-in");
      expect(login.code).toBe(0);
      expect(login.stdout).toBe(`Signed in to ${platform.base} as ${user.email}.\n`);

      expect(statSync(path.join(home, "cgs")).mode & 0o777).toBe(0o700);
      expect(statSync(path.join(home, "cgs", "credentials.json")).mode & 0o777).toBe(0o600);
      const stored = credentialsOf(home).profiles.default!;
      expect(stored).toMatchObject({
        baseUrl: platform.base,
        issuer: KEYCLOAK_ISSUER,
        refreshToken: expect.any(String),
      });

      const whoami = await runCgs(["whoami"], cgsEnv(home));
      expect(whoami.code).toBe(0);
      expect(whoami.stdout).toContain(user.email);

      // logout revokes the refresh token at Keycloak, then forgets it.
      const logout = await runCgs(["logout"], cgsEnv(home));
      expect(logout).toMatchObject({ code: 0, stdout: "Signed out.\n" });
      expect((await refreshWithCli(stored.refreshToken!)).status).toBe(400);
      expect(credentialsOf(home).profiles.default).toBeUndefined();
      const after = await runCgs(["whoami"], cgsEnv(home));
      expect(after).toMatchObject({ code: 3, stdout: "" });
      expect(after.stderr).toContain("cgs login");
    },
    90_000,
  );
});

describe("cgs login --with-token", () => {
  test("when a session pair is piped in, then it is checked against the API and stored for the profile", async () => {
    const email = uniqueEmail("cli-token");
    const home = freshHome();
    const pair = localSession(email);
    const res = await runCgs(
      ["--base-url", platform.base, "--profile", "work", "login", "--with-token"],
      cgsEnv(home),
      JSON.stringify(pair),
    );
    expect(res).toMatchObject({
      code: 0,
      stdout: `Signed in to ${platform.base} as ${email} (profile work).\n`,
    });
    expect(credentialsOf(home).profiles.work).toEqual({
      baseUrl: platform.base,
      issuer: KEYCLOAK_ISSUER,
      ...pair,
    });
    // The profile remembers its base URL: no flag needed afterwards.
    expect((await runCgs(["--profile", "work", "whoami", "--json"], cgsEnv(home))).code).toBe(0);
  });

  test("when a bare access token is piped in, then cgs works with it and says it cannot refresh", async () => {
    const home = freshHome();
    const { accessToken } = localSession(uniqueEmail("cli-bare"));
    const res = await runCgs(
      ["--base-url", platform.base, "login", "--with-token"],
      cgsEnv(home),
      `${accessToken}\n`,
    );
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("No refresh token");
    expect(credentialsOf(home).profiles.default).toEqual({
      baseUrl: platform.base,
      issuer: KEYCLOAK_ISSUER,
      accessToken,
    });
    const token = await runCgs(["token"], cgsEnv(home));
    expect(token).toMatchObject({ code: 0, stdout: `${accessToken}\n` });
  });

  test("when standard input is not a token, or the API refuses it, then nothing is stored and the exit code says why", async () => {
    const home = freshHome();
    const garbage = await runCgs(
      ["--base-url", platform.base, "login", "--with-token"],
      cgsEnv(home),
      "hello world",
    );
    expect(garbage).toMatchObject({ code: 2 });
    expect(garbage.stderr).toContain("not a JWT");
    const forged = expiredCopy(localSession(uniqueEmail("cli-forged")).accessToken, 3600);
    const refused = await runCgs(
      ["--base-url", platform.base, "login", "--with-token"],
      cgsEnv(home),
      forged,
    );
    expect(refused.code).toBe(3);
    expect(() => credentialsOf(home)).toThrow();
  });
});

describe("cgs commands, in text and --json", () => {
  test("when a signed-in player runs every command, then text is for people and --json is the API's JSON only", async () => {
    const email = uniqueEmail("cli-all");
    const home = await signedInHome(email);
    const env = cgsEnv(home);
    const json = async (args: string[], input = "") => {
      const res = await runCgs(["--json", ...args], env, input);
      expect({ args, code: res.code, stderr: res.stderr }).toEqual({
        args,
        code: 0,
        stderr: expect.any(String),
      });
      return JSON.parse(res.stdout) as Record<string, unknown>;
    };
    const text = async (args: string[], input = "") => {
      const res = await runCgs(args, env, input);
      expect({ args, code: res.code, stderr: res.stderr }).toEqual({
        args,
        code: 0,
        stderr: expect.any(String),
      });
      return res;
    };

    expect(await json(["whoami"])).toMatchObject({ email, authMethod: "bearer" });
    expect((await text(["whoami"])).stdout).toContain(`${email} (user `);
    expect(await json(["credits"])).toMatchObject({ balance: 0 });
    expect((await text(["credits"])).stdout).toMatch(/^Balance: 0\.00 [A-Z]{3} \(about 0 min of play at/);

    const topup = await json(["credits", "topup", "2000"]);
    expect(topup.checkoutUrl).toEqual(expect.stringMatching(/^http/));
    expect((await text(["credits", "topup", "600"])).stdout).toMatch(
      /^Pay here to add the credit:\n {2}http/,
    );
    const client = createClient({
      baseUrl: platform.base,
      session: credentialsOf(home).profiles.default as never,
    });
    await fundAccount(client, 1000);

    expect(await json(["storage"])).toMatchObject({ tier: expect.any(String), currency: expect.any(String) });
    expect((await text(["storage"])).stdout).toMatch(/^Tier: .* per period\nPeriod: /);
    expect(await json(["settings"])).toMatchObject({ fps: expect.any(Number) });
    expect((await text(["settings"])).stdout).toMatch(/^resolution=.*\nfps=\d+/);
    expect(await json(["settings", "set", "fps=30", "codec=h265"])).toMatchObject({ fps: 30, codec: "h265" });
    const unknown = await runCgs(["settings", "set", "lowBalanceEmail=false"], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^VALIDATION_ERROR: .*lowBalanceEmail/m);
    expect((await text(["settings", "set", "fps=60"])).stdout).toContain("fps=60\n");

    expect(await json(["session", "status"])).toMatchObject({ state: "idle", ready: false });
    expect((await text(["session", "status"])).stdout).toBe("State: idle\n");
    const started = await text(["session", "start", "--wait", "--timeout", "60"]);
    expect(started.stdout).toMatch(/^Session ready after \d+ s\.\nState: running \(ready\)\nInstance: \S+/);
    expect(started.stdout).toContain("Next: cgs session pair");
    expect(started.stderr).toMatch(/running · ready: yes · \d+ s/);
    // While it starts, the line names the phase and its estimate the way poll's message does.
    expect(started.stderr).toMatch(
      /(starting|running) · ready: no · \d+ s · (Finding a machine|Starting a new machine, (about \d+ (s|min)|taking longer))/,
    );
    expect(await json(["session", "status"])).toMatchObject({ state: "running", ready: true });
    expect((await text(["session", "pair"])).stdout).toMatch(
      /^PIN: \d{4} \(enter it in your streaming client; expires /,
    );
    expect((await json(["session", "pair"])).pin).toMatch(/^\d{4}$/);
    expect((await text(["session", "connect"])).stdout).toMatch(/^\d+\.\d+\.\d+\.\d+:\d+\n$/);
    expect(await json(["session", "connect"])).toMatchObject({ port: expect.any(Number) });
    expect((await text(["session", "vpn-key"])).stdout).toMatch(/^\S+\n\(expires /);
    expect(await json(["session", "vpn-key"])).toMatchObject({ key: expect.any(String) });

    const again = await runCgs(["session", "start"], env);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^SESSION_ALREADY_RUNNING: /m);
    const stopped = await json(["session", "stop", "--wait", "--timeout", "60"]);
    expect(["stopped", "idle"]).toContain(stopped.state);

    const token = await text(["token"]);
    expect(token.stdout.trim().split(".")).toHaveLength(3);

    const wrong = await runCgs(["account", "delete"], env, "someone-else@example.com\n");
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain("nothing was deleted");
    const deleted = await text(["account", "delete"], `${email}\n`);
    expect(deleted.stderr).toContain("Type your e-mail to confirm");
    expect(deleted.stdout).toMatch(/^Account scheduled for deletion; it is purged at \d{4}-/);
    expect(await json(["account", "delete", "--yes"])).toMatchObject({ status: "pending_deletion" });
  }, 150_000);
});

describe("regions and the queue", () => {
  test("when two regions differ in latency, then cgs regions lists the nearer first, in text and --json", async () => {
    const env = cgsEnv(await signedInHome(uniqueEmail("cli-regions")));
    const table = await runCgs(["regions", "--samples", "3"], env);
    expect(table.code).toBe(0);
    expect(table.stderr).toContain("Measuring your round trip to each region");
    const lines = table.stdout.split("\n");
    expect(lines[0]).toMatch(/^REGION +NAME +RTT ms \(median\) +AVAILABLE +QUEUE$/);
    expect(lines[1]).toMatch(/^eu-west-1 +Europe \(Ireland\) +\d+ +yes +0$/);
    expect(lines[2]).toMatch(/^us-east-1 +US East \(N\. Virginia\) +\d+ +yes +0$/);
    const rtt = (line: string) => Number(/ (\d+) +yes/.exec(line)![1]);
    expect(rtt(lines[1]!)).toBeGreaterThanOrEqual(15);
    expect(rtt(lines[1]!)).toBeLessThan(100);
    expect(rtt(lines[2]!)).toBeGreaterThanOrEqual(120);
    expect(table.stdout).toContain("cgs session start --region auto");

    const json = await runCgs(["--json", "regions", "--samples", "2"], env);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([
      expect.objectContaining({ id: "eu-west-1", rttMs: expect.any(Number), samples: 2 }),
      expect.objectContaining({ id: "us-east-1", rttMs: expect.any(Number), samples: 2 }),
    ]);
  });

  test("when the region preference is auto (the default), then session start measures and lands in the nearest region", async () => {
    const email = uniqueEmail("cli-auto");
    const home = await signedInHome(email);
    const env = cgsEnv(home);
    await fundAccount(
      createClient({ baseUrl: platform.base, session: credentialsOf(home).profiles.default as never }),
    );
    // A bound nothing meets is the service's to refuse: the flag and the measurements reached it.
    const tooTight = await runCgs(["session", "start", "--region", "auto", "--max-rtt", "5"], env);
    expect(tooTight.code).toBe(1);
    expect(tooTight.stderr).toMatch(/^VALIDATION_ERROR: .*maxRttMs/m);

    expect((await runCgs(["settings", "set", "region=auto"], env)).code).toBe(0);
    const started = await runCgs(["session", "start", "--wait", "--timeout", "60"], env);
    expect(started.code).toBe(0);
    expect(started.stderr).toMatch(/Measured: eu-west-1 \d+ ms, us-east-1 \d+ ms/);
    expect(started.stdout).toMatch(/^Region: eu-west-1$/m);
    const status = await runCgs(["--json", "session", "status"], env);
    expect(JSON.parse(status.stdout)).toMatchObject({ state: "running", region: "eu-west-1" });
    expect((await runCgs(["session", "stop", "--wait", "--timeout", "60"], env)).code).toBe(0);
  }, 90_000);

  test("when every region is full, then --queue --wait shows the place, Ctrl-C keeps it and says how to leave, and a freed machine starts it", async () => {
    const home = await signedInHome(uniqueEmail("cli-queue"));
    const env = cgsEnv(home);
    await fundAccount(
      createClient({ baseUrl: platform.base, session: credentialsOf(home).profiles.default as never }),
    );
    await setCapacityExhausted(true);
    try {
      const full = await runCgs(["session", "start", "--region", "eu-west-1"], env);
      expect(full.code).toBe(1);
      expect(full.stderr).toMatch(/^CLOUD_CAPACITY: .*(add|Add) --queue to wait in line/m);

      const first = spawnCgs(["session", "start", "--queue", "--wait"], env);
      const firstErr = { text: "" };
      first.stderr.on("data", (d) => (firstErr.text += d));
      const firstExit = new Promise<number | null>((resolve) => first.on("close", resolve));
      await stderrShows(first, /queued · 1st in line · (any moment now|about \d+ min)/, firstErr);
      first.kill("SIGINT");
      expect(await firstExit).toBe(130);
      expect(firstErr.text).toMatch(/Still in line \(1st in line · .*\); your place is kept/);
      expect(firstErr.text).toContain("Leave the line with `cgs session stop`");

      // Each pass of the line tries a launch for its head, which poll shows as `starting` for that moment.
      let status = await runCgs(["session", "status"], env);
      for (let i = 0; i < 5 && status.stdout.startsWith("State: starting"); i++) {
        await new Promise((r) => setTimeout(r, 300));
        status = await runCgs(["session", "status"], env);
      }
      expect(status.stdout).toMatch(
        /^State: queued\nIn line: 1st in line · .* \(for eu-west-1, us-east-1; nothing is charged/,
      );
      expect(status.stdout).not.toContain("Started:");
      expect((await runCgs(["session", "stop"], env)).stdout).toBe("Session stopped.\n");

      const second = spawnCgs(
        ["session", "start", "--regions", "eu-west-1,us-east-1", "--queue", "--wait"],
        env,
      );
      const secondOut = { text: "" };
      const secondErr = { text: "" };
      second.stdout.on("data", (d) => (secondOut.text += d));
      second.stderr.on("data", (d) => (secondErr.text += d));
      const secondExit = new Promise<number | null>((resolve) => second.on("close", resolve));
      await stderrShows(second, /queued · 1st in line/, secondErr);
      // A machine frees in the second region it waits for, not the first: it takes that one.
      await setCapacityExhausted(false, "us-east-1");
      const stuck = setTimeout(() => second.kill("SIGKILL"), 45_000);
      expect({ code: await secondExit, stderr: secondErr.text }).toEqual({
        code: 0,
        stderr: expect.any(String),
      });
      clearTimeout(stuck);
      expect(secondOut.text).toMatch(/^Session ready after \d+ s\.\nState: running \(ready\)/);
      expect(secondOut.text).toMatch(/^Region: us-east-1$/m);
      const stopped = await runCgs(["session", "stop", "--wait", "--timeout", "30"], env);
      expect({ code: stopped.code, stderr: stopped.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
    } finally {
      await setCapacityExhausted(false);
    }
  }, 150_000);
});

describe("rotation with several cgs processes", () => {
  test("when the access token has expired and two commands run at once, then both succeed and the session survives", async () => {
    const home = await signedInHome(uniqueEmail("cli-race"));
    const file = path.join(home, "cgs", "credentials.json");
    const stored = credentialsOf(home);
    const original = stored.profiles.default!;
    stored.profiles.default = { ...original, accessToken: expiredCopy(original.accessToken) };
    writeFileSync(file, JSON.stringify(stored), { mode: 0o600 });

    const results = await Promise.all([
      runCgs(["--json", "credits"], cgsEnv(home)),
      runCgs(["--json", "whoami"], cgsEnv(home)),
      runCgs(["--json", "settings"], cgsEnv(home)),
    ]);
    for (const result of results)
      expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
    const rotated = credentialsOf(home).profiles.default!;
    expect(rotated.refreshToken).not.toBe(original.refreshToken);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    // One refresh happened: a second one with the same token would have made Keycloak end the session.
    expect((await runCgs(["whoami"], cgsEnv(home))).code).toBe(0);
  });
});

describe("a refresh that hangs", () => {
  /**
   * An identity provider whose token endpoint hangs once: it serves Keycloak's configuration under its own issuer,
   * holds the first refresh without an answer (dropped when the client gives up, so Keycloak never sees it) and
   * forwards the later ones to Keycloak. A hang the real Keycloak cannot be made to produce on demand.
   */
  async function hangingIssuer() {
    const forwarded: string[] = [];
    let held = 0;
    const server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString("utf8")));
      req.on("end", () => {
        void (async () => {
          if (req.url === "/.well-known/openid-configuration") {
            res.writeHead(200, { "content-type": "application/json" });
            res.end(JSON.stringify({ issuer: self, token_endpoint: `${self}/token` }));
            return;
          }
          if (held === 0) {
            held += 1;
            return; // never answered
          }
          forwarded.push(new URLSearchParams(body).get("refresh_token") ?? "");
          const answer = await fetch(KEYCLOAK_TOKEN, {
            method: "POST",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body,
          });
          res.writeHead(answer.status, { "content-type": "application/json" });
          res.end(await answer.text());
        })();
      });
    });
    const listening = await listenLocally(server);
    const self = listening.url;
    return { url: self, forwarded, heldCount: () => held, close: listening.close };
  }

  test("when the token endpoint hangs, then the first cgs gives up well before the lock goes stale, the second refreshes once and the session survives", async () => {
    const issuer = await hangingIssuer();
    try {
      const home = await signedInHome(uniqueEmail("cli-hang"));
      const file = path.join(home, "cgs", "credentials.json");
      const stored = credentialsOf(home);
      const original = stored.profiles.default!;
      stored.profiles.default = {
        ...original,
        issuer: issuer.url,
        accessToken: expiredCopy(original.accessToken),
      };
      writeFileSync(file, JSON.stringify(stored), { mode: 0o600 });

      const began = Date.now();
      const first = runCgs(["whoami"], cgsEnv(home));
      while (issuer.heldCount() === 0) await new Promise((r) => setTimeout(r, 50));
      const second = runCgs(["--json", "whoami"], cgsEnv(home));
      const a = await first;
      expect(a.code).toBe(1);
      expect(a.stderr).toContain("did not answer a refresh within 15 s");
      expect(Date.now() - began).toBeLessThan(30_000);
      const b = await second;
      expect({ code: b.code, stderr: b.stderr }).toEqual({ code: 0, stderr: "" });

      // Keycloak saw the refresh token once: the rotated pair is alive (a reuse would have ended the session).
      expect(issuer.forwarded).toEqual([original.refreshToken]);
      const rotated = credentialsOf(home).profiles.default!;
      expect(rotated.refreshToken).not.toBe(original.refreshToken);
      expect((await refreshGrant(rotated.refreshToken!)).status).toBe(200);
    } finally {
      await issuer.close();
    }
  }, 60_000);
});

describe("exit codes and base URL", () => {
  test("when cgs is misused, then it exits 2 with the problem and the help", async () => {
    const home = freshHome();
    const unknown = await runCgs(["sesion"], cgsEnv(home));
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown command 'sesion'");
    const badTimeout = await runCgs(["session", "start", "--wait", "--timeout", "soon"], cgsEnv(home));
    expect(badTimeout.code).toBe(2);
    expect(badTimeout.stderr).toContain("must be a whole number of seconds");
    const badPair = await runCgs(["settings", "set", "fps"], cgsEnv(home));
    expect(badPair.code).toBe(2);
    for (const [args, names] of [
      [["--region", "nowhere"], "option '--region <id|auto>' argument 'nowhere' is invalid"],
      [["--regions", "eu-west-1,eu-west-1"], "eu-west-1 is listed twice"],
      [
        ["--region", "auto", "--regions", "eu-west-1"],
        "'--region <id|auto>' cannot be used with option '--regions",
      ],
      [["--max-rtt", "0"], "option '--max-rtt <ms>' argument '0' is invalid"],
      [["--region", "eu-west-1", "--max-rtt", "100"], "--max-rtt applies only with --region auto"],
    ] as const) {
      const bad = await runCgs(["session", "start", ...args], cgsEnv(home));
      expect({ args, code: bad.code, named: bad.stderr.includes(names) }).toEqual({
        args,
        code: 2,
        named: true,
      });
    }
  });

  test("when cgs is not signed in, then it exits 3 and says to run cgs login", async () => {
    const res = await runCgs(["credits"], cgsEnv(freshHome()));
    expect(res).toMatchObject({ code: 3, stdout: "", stderr: "Not signed in. Run `cgs login` first.\n" });
  });

  test("when the API refuses a request, then cgs exits 1 and prints CODE: message", async () => {
    const home = await signedInHome(uniqueEmail("cli-err"));
    const res = await runCgs(["settings", "set", "fps=7"], cgsEnv(home));
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/^VALIDATION_ERROR: .*fps/);
  });

  test("when --base-url and SERVICE_BASE_URL both name an origin, then the flag wins", async () => {
    const home = freshHome();
    const nowhere = "http://127.0.0.1:9";
    const login = await runCgs(
      ["--base-url", platform.base, "login", "--with-token"],
      cgsEnv(home, { SERVICE_BASE_URL: nowhere }),
      JSON.stringify(localSession(uniqueEmail("cli-base"))),
    );
    expect(login.code).toBe(0);
    expect(credentialsOf(home).profiles.default!.baseUrl).toBe(platform.base);
    const viaFlag = await runCgs(
      ["--base-url", platform.base, "whoami"],
      cgsEnv(home, { SERVICE_BASE_URL: nowhere }),
    );
    expect(viaFlag.code).toBe(0);
    // The profile remembers its origin; the variable naming another one is refused (see below).
    expect((await runCgs(["whoami"], cgsEnv(home))).code).toBe(0);
    expect((await runCgs(["whoami"], cgsEnv(home, { SERVICE_BASE_URL: nowhere }))).code).toBe(3);
  });

  test("when a newcomer types npx cgs --help at the repository root, then every command is listed with the exit codes", () => {
    const res = spawnSync("npx", ["--no-install", "cgs", "--help"], { cwd: repoRoot, encoding: "utf8" });
    expect(res.status).toBe(0);
    for (const command of [
      "login",
      "logout",
      "whoami",
      "token",
      "session",
      "regions",
      "credits",
      "storage",
      "settings",
      "account",
    ]) {
      expect(res.stdout).toMatch(new RegExp(`^  ${command}\\b`, "m"));
    }
    expect(res.stdout).toContain("Exit codes: 0 success, 1 API error, 2 usage error, 3 not signed in");
  });
});

describe("a profile's tokens go only to its own origin", () => {
  let stranger: RecordingListener;
  beforeAll(async () => {
    stranger = await startRecordingListener();
  });
  afterAll(() => stranger.close());

  /** A signed-in home whose access token has expired, so any command also needs a refresh. */
  async function expiredHome(prefix: string, edit: (p: Record<string, unknown>) => void = () => undefined) {
    const home = await signedInHome(uniqueEmail(prefix));
    const stored = credentialsOf(home);
    const profile = stored.profiles.default!;
    const changed: Record<string, unknown> = { ...profile, accessToken: expiredCopy(profile.accessToken) };
    edit(changed);
    stored.profiles.default = changed as never;
    writeFileSync(path.join(home, "cgs", "credentials.json"), JSON.stringify(stored), { mode: 0o600 });
    return { home, profile };
  }

  test("when SERVICE_BASE_URL or --base-url names another origin than the profile's, then cgs sends it nothing and says how to sign in there", async () => {
    const { home } = await expiredHome("cli-origin");
    const runs: [string[], Record<string, string>][] = [
      [["whoami"], { SERVICE_BASE_URL: stranger.url }],
      [["token"], { SERVICE_BASE_URL: stranger.url }],
      [["--base-url", stranger.url, "credits"], {}],
    ];
    for (const [args, extra] of runs) {
      const res = await runCgs(args, cgsEnv(home, extra));
      expect({ args, code: res.code, stdout: res.stdout }).toEqual({ args, code: 3, stdout: "" });
      const source = args[0] === "--base-url" ? "--base-url" : "SERVICE_BASE_URL";
      expect(res.stderr).toContain(
        `The profile "default" is signed in to ${platform.base}, but ${source} names ${stranger.url}.`,
      );
      expect(res.stderr).toContain("nothing was sent");
      expect(res.stderr).toContain(`cgs login --base-url ${stranger.url} --profile NAME`);
    }
    expect(stranger.requests).toEqual([]);
    // The profile's own origin, however it is written, still works (and refreshes at Keycloak).
    const same = await runCgs(["whoami"], cgsEnv(home, { SERVICE_BASE_URL: `${platform.base}/` }));
    expect(same.code).toBe(0);
  });

  test("when a profile saved by an older cgs has no issuer, then it refreshes at its token's issuer and records it", async () => {
    const { home } = await expiredHome("cli-legacy", (p) => delete p.issuer);
    expect(credentialsOf(home).profiles.default!.issuer).toBeUndefined();
    const res = await runCgs(["--json", "whoami"], cgsEnv(home));
    expect({ code: res.code, stderr: res.stderr }).toEqual({ code: 0, stderr: "" });
    expect(credentialsOf(home).profiles.default!.issuer).toBe(KEYCLOAK_ISSUER);
  });

  test("when the base URL is plain http to another machine, then cgs refuses it before sending anything", async () => {
    const home = freshHome();
    const res = await runCgs(
      ["--base-url", "http://play.example.com", "login", "--with-token"],
      cgsEnv(home),
      JSON.stringify(localSession(uniqueEmail("cli-http"))),
    );
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(
      /^error: The API base URL \(--base-url\) http:\/\/play\.example\.com uses plain http/,
    );
    expect(() => credentialsOf(home)).toThrow();
  });
});
