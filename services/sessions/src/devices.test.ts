import { eq } from "drizzle-orm";
import { signHostReport } from "@cgs/host-agent";
import { sessionsTable } from "./data/session-tables";
import { ingestHostReports } from "./domain/host-reports";
import { startRunningSession, startSessionsHarness, type SessionsHarness } from "./testing/sessions-harness";

// Devices that stay paired: Sunshine keeps its client list on the account volume (the image puts its state
// there), which the cloud simulator models per volume; the sessions service records what the host lists and
// unpairs what the player removes, at once while a session runs and otherwise when the next host comes up.
let h: SessionsHarness;
let n = 0;
const account = () => `dev-${Date.now().toString(36)}-${(n += 1)}`;

beforeAll(async () => {
  h = await startSessionsHarness();
});
afterAll(() => h.close());
afterEach(() => expect(h.contractViolations).toEqual([]));

interface Device {
  id: string;
  name: string;
  pairedAt: string;
  lastUsedAt: string | null;
}

const devices = async (acct: string): Promise<Device[]> => {
  const res = await h.call(acct, "GET", "/api/v1/devices");
  expect(res.status).toBe(200);
  return (res.body as { items: Device[] }).items;
};

/** The client list on the account's volume, as Sunshine on the next host will read it. */
const onVolume = (acct: string) =>
  [...h.cloud.volumes.values()].find((v) => v.accountId === acct)?.hostClients.map((c) => c.name) ?? [];

/** The player asks for a PIN under a name and enters it in their client, which completes the pairing. */
async function pairDevice(acct: string, deviceName: string): Promise<void> {
  const pair = await h.call(acct, "POST", "/api/v1/sessions/pair", { body: { deviceName } });
  expect(pair.status).toBe(200);
  const { privateNetIp } = (await h.call(acct, "GET", "/api/v1/sessions/poll")).body as {
    privateNetIp: string;
  };
  expect(h.streamingHost.completePairing(privateNetIp)).toMatchObject({ name: deviceName });
  // Listing while the session runs asks the host first: the device is there at once.
  expect((await devices(acct)).map((d) => d.name)).toContain(deviceName);
}

async function stop(acct: string): Promise<void> {
  expect((await h.call(acct, "POST", "/api/v1/sessions/stop")).status).toBe(200);
  await h.reconciler.tick();
  await h.reconciler.tick();
  expect((await h.call(acct, "GET", "/api/v1/sessions/poll")).body.state).toBe("stopped");
}

describe("paired devices", () => {
  it("when a device pairs in one session, then after a stop and a new start it is still listed and still paired on the host", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    await pairDevice(acct, "living-room-tv");
    const [tv] = await devices(acct);
    expect(tv).toMatchObject({ name: "living-room-tv", lastUsedAt: null });
    await stop(acct);

    await startRunningSession(h, acct);
    expect(await devices(acct)).toEqual([tv]);
    // The new instance's Sunshine reads the same volume: the device needs no new pairing.
    expect(onVolume(acct)).toEqual(["living-room-tv"]);
    await stop(acct);
  });

  it("when a device is removed while no session runs, then it leaves the list at once and the next session's host unpairs it", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    await pairDevice(acct, "old-laptop");
    await pairDevice(acct, "phone");
    await stop(acct);
    const laptop = (await devices(acct)).find((d) => d.name === "old-laptop")!;

    expect((await h.call(acct, "DELETE", `/api/v1/devices/${laptop.id}`)).status).toBe(204);
    expect((await devices(acct)).map((d) => d.name)).toEqual(["phone"]);
    expect(onVolume(acct)).toEqual(["old-laptop", "phone"]);

    await startRunningSession(h, acct);
    expect(onVolume(acct)).toEqual(["phone"]);
    expect((await devices(acct)).map((d) => d.name)).toEqual(["phone"]);
    await stop(acct);
  });

  it("when a device is removed while its session runs, then the host unpairs it at once", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    await pairDevice(acct, "tablet");
    const [tablet] = await devices(acct);
    expect(onVolume(acct)).toEqual(["tablet"]);
    expect((await h.call(acct, "DELETE", `/api/v1/devices/${tablet!.id}`)).status).toBe(204);
    expect(onVolume(acct)).toEqual([]);
    expect(await devices(acct)).toEqual([]);
    await stop(acct);
  });

  it("when the host reports a streaming client, then the paired devices show that time as last used", async () => {
    const acct = account();
    const running = await startRunningSession(h, acct);
    await pairDevice(acct, "handheld");
    const [row] = await h.database.db.select().from(sessionsTable).where(eq(sessionsTable.accountId, acct));
    const at = new Date().toISOString();
    const report = signHostReport(
      {
        kind: "session",
        instanceId: running.instanceId,
        sessionId: row!.id,
        poolId: null,
        seq: 1,
        sentAt: at,
        observedAt: at,
        clientsConnected: 1,
        lastInputAt: at,
        sunshineAnswers: true,
        certSha256: "ef".repeat(32),
        assignCertSha256: null,
        agentVersion: "test",
      },
      h.vault.agentKey(row!.id),
    );
    expect(await ingestHostReports(h.deps, h.vault.agentKeys, [JSON.stringify(report)])).toEqual(["applied"]);
    const [device] = await devices(acct);
    expect(device!.lastUsedAt).not.toBeNull();
    expect(Math.abs(Date.parse(device!.lastUsedAt!) - Date.now())).toBeLessThan(10_000);
    await stop(acct);
  });

  it("when a device id is unknown, another account's, or not an id, then DELETE answers 404 or 400 naming id, and nothing changes", async () => {
    const [owner, other] = [account(), account()];
    await startRunningSession(h, owner);
    await pairDevice(owner, "console");
    const [device] = await devices(owner);
    const foreign = await h.call(other, "DELETE", `/api/v1/devices/${device!.id}`);
    expect(foreign).toMatchObject({ status: 404, body: { error: "NOT_FOUND" } });
    const unknown = await h.call(owner, "DELETE", "/api/v1/devices/00000000-0000-4000-8000-000000000000");
    expect(unknown.status).toBe(404);
    const bad = await h.call(owner, "DELETE", "/api/v1/devices/not-an-id");
    expect(bad.status).toBe(400);
    expect(bad.body.error).toBe("VALIDATION_ERROR");
    expect(bad.body.message).toMatch(/\bid\b/);
    expect((await devices(owner)).map((d) => d.name)).toEqual(["console"]);
    await stop(owner);
  });

  it("when a PIN is asked for but no client enters it, then no device is recorded", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    expect((await h.call(acct, "POST", "/api/v1/sessions/pair")).status).toBe(200);
    expect(await devices(acct)).toEqual([]);
    await stop(acct);
  });

  it("when a device name breaks the rules, then pair answers 400 naming deviceName and no PIN is minted", async () => {
    const acct = account();
    await startRunningSession(h, acct);
    const res = await h.call(acct, "POST", "/api/v1/sessions/pair", { body: { deviceName: "<script>" } });
    expect(res.status).toBe(400);
    expect(res.body.message).toContain("deviceName");
    expect(await devices(acct)).toEqual([]);
    await stop(acct);
  });
});
