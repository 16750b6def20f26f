import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { startXvfb, xauthorityEntry, type Xvfb } from "../testing/xvfb";
import { parseDisplay, X11IdleReader } from "./x11-idle-reader";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("input idle time from a real X server (Xvfb) through MIT-SCREEN-SAVER", () => {
  let x: Xvfb;
  let reader: X11IdleReader;

  beforeAll(async () => {
    x = await startXvfb();
    reader = new X11IdleReader(x.display);
  });
  afterAll(async () => {
    reader.close();
    await x.stop();
  });

  it("when nobody touches the display, then the idle time grows with the clock", async () => {
    const first = await reader.idleMs();
    await sleep(400);
    const second = await reader.idleMs();
    expect(first).not.toBeNull();
    expect(second! - first!).toBeGreaterThanOrEqual(300);
  });

  it("when the mouse moves and a key is pressed (xdotool), then the idle time falls back to almost nothing", async () => {
    while ((await reader.idleMs())! < 1_200) await sleep(100);
    x.xdotool("mousemove", String(10 + Math.floor(Math.random() * 500)), "40");
    expect(await reader.idleMs()).toBeLessThan(500);
    await sleep(1_200);
    x.xdotool("key", "space");
    expect(await reader.idleMs()).toBeLessThan(500);
  });

  it("when the X server restarts, then the reader fails once and reads the new server after it", async () => {
    const other = await startXvfb();
    const own = new X11IdleReader(other.display);
    expect(await own.idleMs()).not.toBeNull();
    await other.stop();
    await expect(own.idleMs()).rejects.toThrow();
    own.close();
  });
});

describe("an X server that asks for a cookie", () => {
  let dir: string;
  let x: Xvfb;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "xauth-"));
  });
  afterAll(async () => {
    await x?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("when XAUTHORITY holds the display's cookie, then the reader gets in; without it, the error says it was refused", async () => {
    const serverAuth = path.join(dir, "server");
    // Xvfb learns the display number only when it starts: write a wild-number entry for the server.
    const cookie = randomBytes(16);
    const wild = xauthorityEntry(hostname(), 0, cookie);
    wild.writeUInt16BE(65535, 0);
    writeFileSync(serverAuth, wild);
    x = await startXvfb({ authFile: serverAuth });
    const { number } = parseDisplay(x.display);
    const clientAuth = path.join(dir, "client");
    writeFileSync(clientAuth, xauthorityEntry(hostname(), number, cookie));

    const withCookie = new X11IdleReader(x.display, clientAuth);
    expect(await withCookie.idleMs()).toEqual(expect.any(Number));
    withCookie.close();

    const without = new X11IdleReader(x.display, path.join(dir, "missing"));
    await expect(without.idleMs()).rejects.toThrow(/refused the connection/);
    without.close();
  });

  it("when DISPLAY is malformed, then the error names it", async () => {
    await expect(new X11IdleReader("nonsense").idleMs()).rejects.toThrow(/DISPLAY "nonsense"/);
  });
});
