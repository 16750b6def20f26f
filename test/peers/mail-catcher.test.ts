import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";
import nodemailer from "nodemailer";

interface Address {
  Name: string;
  Address: string;
}
interface Summary {
  ID: string;
  MessageID: string;
  From: Address;
  To: Address[];
  Subject: string;
  Created: string;
  Snippet: string;
}
interface Listing {
  total: number;
  count: number;
  messages: Summary[];
}
interface Detail {
  ID: string;
  MessageID: string;
  From: Address;
  To: Address[];
  Subject: string;
  Date: string;
  Text: string;
  HTML: string;
}

const SCRIPT = path.join(__dirname, "mail-catcher.mjs");

let child: ChildProcessWithoutNullStreams;
let output = "";
let smtpPort = 0;
let api = "";

/** Starts the catcher on free ports (port 0) and reads the ports it chose from its ready line. */
function startCatcher(env: Record<string, string> = {}): Promise<{ smtpPort: number; httpPort: number }> {
  output = "";
  child = spawn(process.execPath, [SCRIPT], {
    env: { ...process.env, MAILPIT_SMTP_PORT: "0", MAILPIT_HTTP_PORT: "0", ...env },
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`catcher did not get ready:\n${output}`)), 15_000);
    const onData = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = /ready (\{.*\})/.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(JSON.parse(match[1] ?? "{}") as { smtpPort: number; httpPort: number });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`catcher exited with ${code}:\n${output}`));
    });
  });
}

const exited = (): Promise<number | null> =>
  child.exitCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((resolve) => child.once("exit", resolve));

async function getJson<T>(pathAndQuery: string): Promise<T> {
  const res = await fetch(`${api}${pathAndQuery}`);
  expect(res.status).toBe(200);
  return (await res.json()) as T;
}

const transport = () =>
  nodemailer.createTransport({ host: "127.0.0.1", port: smtpPort, secure: false, ignoreTLS: true });

async function send(to: string, subject: string, text: string, html?: string): Promise<void> {
  await transport().sendMail({ from: "CGS <no-reply@cgs.test>", to, subject, text, html });
}

const unique = (name: string): string =>
  `${name}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}@example.test`;

beforeAll(async () => {
  const ports = await startCatcher({ MAILPIT_MAX_SIZE: "65536" });
  smtpPort = ports.smtpPort;
  api = `http://127.0.0.1:${ports.httpPort}`;
});

afterAll(async () => {
  if (child.exitCode === null) {
    child.kill("SIGKILL");
    await exited();
  }
});

describe("mail catcher", () => {
  it("when it is ready, then /api/v1/info answers 200 with Version and Messages", async () => {
    const info = await getJson<{ Version: string; Messages: number }>("/api/v1/info");

    expect(typeof info.Version).toBe("string");
    expect(typeof info.Messages).toBe("number");
  });

  it("when a password-reset mail is sent over SMTP, then the API lists it and shows its text with the link", async () => {
    const to = unique("alice");
    const link = "https://app.cgs.test/reset-password?token=tok_123";
    await send(
      to,
      "Reset your password",
      `Open ${link} to choose a new password.`,
      `<a href="${link}">Reset</a>`,
    );

    const list = await getJson<Listing>("/api/v1/messages?limit=10");
    const summary = list.messages[0];
    if (!summary) throw new Error("no message listed");
    expect(summary.To).toEqual([{ Name: "", Address: to }]);
    expect(summary.From).toEqual({ Name: "CGS", Address: "no-reply@cgs.test" });
    expect(summary.Subject).toBe("Reset your password");
    expect(summary.Snippet).toContain(link);
    expect(Number.isNaN(Date.parse(summary.Created))).toBe(false);
    expect(list.total).toBeGreaterThanOrEqual(1);
    expect(list.count).toBe(list.messages.length);

    const detail = await getJson<Detail>(`/api/v1/message/${summary.ID}`);
    expect(detail.ID).toBe(summary.ID);
    expect(detail.MessageID).toBe(summary.MessageID);
    expect(detail.To).toEqual([{ Name: "", Address: to }]);
    expect(detail.Subject).toBe("Reset your password");
    expect(detail.Text).toContain(link);
    expect(detail.HTML).toContain(`href="${link}"`);
  });

  it("when several mails are listed, then the newest comes first and limit bounds the page", async () => {
    const to = unique("order");
    await send(to, "first", "1");
    await send(to, "second", "2");

    const list = await getJson<Listing>("/api/v1/messages?limit=1");

    expect(list.count).toBe(1);
    expect(list.messages).toHaveLength(1);
    expect(list.messages[0]?.Subject).toBe("second");
    expect(list.total).toBeGreaterThanOrEqual(2);
  });

  it("when searching with to:, then only that recipient's mails are found", async () => {
    const bob = unique("bob");
    const carol = unique("carol");
    await send(bob, "Reset your password", "bob's link");
    await send(carol, "Reset your password", "carol's link");
    await send(bob, "Welcome", "hello bob");

    const found = await getJson<Listing>(`/api/v1/search?query=${encodeURIComponent(`to:${bob}`)}`);

    expect(found.messages).toHaveLength(2);
    expect(found.messages.every((m) => m.To.some((a) => a.Address === bob))).toBe(true);
    expect(found.messages.map((m) => m.Subject)).toEqual(["Welcome", "Reset your password"]);
  });

  it("when searching with to: and subject: terms, then both must match", async () => {
    const dave = unique("dave");
    await send(dave, "Reset your password", "x");
    await send(dave, "Welcome aboard", "y");

    const query = `to:${dave} subject:"reset your"`;
    const found = await getJson<Listing>(`/api/v1/search?query=${encodeURIComponent(query)}`);

    expect(found.messages.map((m) => m.Subject)).toEqual(["Reset your password"]);
  });

  it("when an unknown message is asked for, then it answers 404", async () => {
    const res = await fetch(`${api}/api/v1/message/does-not-exist`);

    expect(res.status).toBe(404);
  });

  it("when an unknown route is called, then it answers 404", async () => {
    const res = await fetch(`${api}/api/v2/nothing`);

    expect(res.status).toBe(404);
  });

  it("when bad input arrives, then it answers 4xx and keeps serving", async () => {
    const badJson = await fetch(`${api}/api/v1/messages`, { method: "DELETE", body: "{not json" });
    const badIds = await fetch(`${api}/api/v1/messages`, { method: "DELETE", body: '{"IDs": 5}' });
    const badLimit = await fetch(`${api}/api/v1/messages?limit=abc`);
    const badPath = await fetch(`${api}/api/v1/message/%E0%A4%A`);
    await transport().sendMail({
      envelope: { from: "x@cgs.test", to: ["raw@example.test"] },
      raw: "this is not a mail at all\r\n",
    });
    const tooBig = transport().sendMail({
      from: "x@cgs.test",
      to: "big@example.test",
      text: "x".repeat(100_000),
    });

    expect(badJson.status).toBe(400);
    expect(badIds.status).toBe(400);
    expect(badLimit.status).toBe(400);
    expect(badPath.status).toBe(400);
    await expect(tooBig).rejects.toMatchObject({ responseCode: 552 });
    const raw = await getJson<Listing>(`/api/v1/search?query=${encodeURIComponent("to:raw@example.test")}`);
    expect(raw.messages).toHaveLength(1);
    expect((await fetch(`${api}/api/v1/info`)).status).toBe(200);
  });

  it("when some messages are deleted by ID, then only those disappear", async () => {
    const erin = unique("erin");
    await send(erin, "keep", "k");
    await send(erin, "drop", "d");
    const before = await getJson<Listing>(`/api/v1/search?query=${encodeURIComponent(`to:${erin}`)}`);
    const drop = before.messages.find((m) => m.Subject === "drop");

    const res = await fetch(`${api}/api/v1/messages`, {
      method: "DELETE",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ IDs: [drop?.ID] }),
    });

    expect(res.status).toBe(200);
    const after = await getJson<Listing>(`/api/v1/search?query=${encodeURIComponent(`to:${erin}`)}`);
    expect(after.messages.map((m) => m.Subject)).toEqual(["keep"]);
  });

  it("when all messages are deleted, then the list and info are empty", async () => {
    await send(unique("frank"), "something", "to delete");

    const res = await fetch(`${api}/api/v1/messages`, { method: "DELETE" });

    expect(res.status).toBe(200);
    const list = await getJson<Listing>("/api/v1/messages");
    expect(list).toMatchObject({ total: 0, count: 0, messages: [] });
    expect((await getJson<{ Messages: number }>("/api/v1/info")).Messages).toBe(0);
  });

  it("when it gets SIGTERM, then it exits with 0", async () => {
    child.kill("SIGTERM");

    expect(await exited()).toBe(0);
  });
});

describe("mail catcher bounds", () => {
  it("when more messages arrive than MAILPIT_MAX_MESSAGES, then the oldest are dropped", async () => {
    const ports = await startCatcher({ MAILPIT_MAX_MESSAGES: "2" });
    smtpPort = ports.smtpPort;
    api = `http://127.0.0.1:${ports.httpPort}`;
    const to = unique("bounded");

    for (const subject of ["one", "two", "three"]) await send(to, subject, subject);

    const list = await getJson<Listing>("/api/v1/messages");
    expect(list.total).toBe(2);
    expect(list.messages.map((m) => m.Subject)).toEqual(["three", "two"]);
  });
});
