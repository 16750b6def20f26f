import { readFileSync } from "node:fs";
import { hostname } from "node:os";
import net from "node:net";
import type { InputIdleReader } from "../agent/host-agent";

/**
 * Milliseconds since the last user input on an X display, from the MIT-SCREEN-SAVER extension's QueryInfo
 * request (what `xprintidle` reads through libXss), spoken directly over the X11 protocol: no native module and no
 * extra package on the host. A Windows host would implement InputIdleReader with GetLastInputInfo instead.
 */
export class X11IdleReader implements InputIdleReader {
  private connection: Promise<X11Connection> | undefined;

  constructor(
    private readonly display: string,
    private readonly xauthority?: string,
    private readonly timeoutMs = 2_000,
  ) {}

  async idleMs(): Promise<number | null> {
    this.connection ??= X11Connection.open(this.display, this.xauthority, this.timeoutMs);
    try {
      return await (await this.connection).msSinceUserInput();
    } catch (err) {
      // The X server restarted or went away: reconnect on the next look.
      const failed = this.connection;
      this.connection = undefined;
      void failed.then((c) => c.close()).catch(() => undefined);
      throw err;
    }
  }

  close(): void {
    void this.connection?.then((c) => c.close()).catch(() => undefined);
    this.connection = undefined;
  }
}

interface ParsedDisplay {
  host: string;
  number: number;
}

export function parseDisplay(display: string): ParsedDisplay {
  const match = /^([^:]*):(\d+)(?:\.\d+)?$/.exec(display);
  if (!match) throw new Error(`DISPLAY "${display}" is not of the form [host]:number[.screen]`);
  return { host: match[1] ?? "", number: Number(match[2]) };
}

const pad4 = (n: number) => (4 - (n % 4)) % 4;

/** The MIT-MAGIC-COOKIE-1 for the display from an Xauthority file, if it has one. */
export function readCookie(file: string, displayNumber: number, host = hostname()): Buffer | undefined {
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch {
    return undefined;
  }
  let offset = 0;
  const field = (): Buffer => {
    const length = data.readUInt16BE(offset);
    const value = data.subarray(offset + 2, offset + 2 + length);
    offset += 2 + length;
    return value;
  };
  while (offset + 2 <= data.length) {
    const family = data.readUInt16BE(offset);
    offset += 2;
    const address = field().toString("latin1");
    const number = field().toString("latin1");
    const name = field().toString("latin1");
    const cookie = field();
    const local = family === 256 /* FamilyLocal */ && address === host;
    const wild = family === 65535;
    const sameDisplay = number === "" || Number(number) === displayNumber;
    if ((local || wild) && sameDisplay && name === "MIT-MAGIC-COOKIE-1") return cookie;
  }
  return undefined;
}

/** A minimal X11 client: connection setup, QueryExtension and MIT-SCREEN-SAVER QueryInfo, one request at a time. */
export class X11Connection {
  private buffered = Buffer.alloc(0);
  private waiting:
    { resolve(b: Buffer): void; reject(e: Error): void; need: (b: Buffer) => number } | undefined;
  private sequence = 0;
  private closedWith: Error | undefined;
  private root = 0;
  private screenSaverOpcode = 0;

  private constructor(
    private readonly socket: net.Socket,
    private readonly timeoutMs: number,
  ) {
    socket.on("data", (chunk: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, chunk]);
      this.deliver();
    });
    const fail = (err: Error) => {
      this.closedWith ??= err;
      this.waiting?.reject(err);
      this.waiting = undefined;
    };
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("X server closed the connection")));
  }

  static async open(display: string, xauthority?: string, timeoutMs = 2_000): Promise<X11Connection> {
    const { host, number } = parseDisplay(display);
    const socket =
      host === "" || host === "unix"
        ? net.connect({ path: `/tmp/.X11-unix/X${number}` })
        : net.connect({ host, port: 6000 + number });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`X display ${display} did not accept a connection`)),
        timeoutMs,
      );
      socket.once("connect", () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once("error", (err) => {
        clearTimeout(timer);
        reject(new Error(`cannot connect to X display ${display}: ${err.message}`));
      });
    });
    const connection = new X11Connection(socket, timeoutMs);
    try {
      const authFile = xauthority ?? (process.env.HOME ? `${process.env.HOME}/.Xauthority` : undefined);
      const cookie = authFile ? readCookie(authFile, number) : undefined;
      await connection.setup(display, cookie).catch((err: Error) => {
        // Xvfb may close the socket before its refusal reply is read: either way it did not let us in.
        throw err.message.includes("refused")
          ? err
          : new Error(`X display ${display} refused the connection: ${err.message}`);
      });
      await connection.findScreenSaver(display);
    } catch (err) {
      connection.close();
      throw err;
    }
    return connection;
  }

  private deliver(): void {
    const waiting = this.waiting;
    if (!waiting) return;
    for (;;) {
      const need = waiting.need(this.buffered);
      if (need < 0 || this.buffered.length < need) return;
      const message = this.buffered.subarray(0, need);
      this.buffered = this.buffered.subarray(need);
      // Events (code >= 2 after setup) are not asked for; skip any that arrive.
      if (this.sequence > 0 && message[0]! >= 2) continue;
      this.waiting = undefined;
      waiting.resolve(Buffer.from(message));
      return;
    }
  }

  private read(need: (b: Buffer) => number): Promise<Buffer> {
    if (this.closedWith) return Promise.reject(this.closedWith);
    return new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = undefined;
        reject(new Error("X server did not answer in time"));
      }, this.timeoutMs);
      this.waiting = {
        resolve: (b) => {
          clearTimeout(timer);
          resolve(b);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
        need,
      };
      this.deliver();
    });
  }

  private async setup(display: string, cookie: Buffer | undefined): Promise<void> {
    const name = cookie ? Buffer.from("MIT-MAGIC-COOKIE-1", "latin1") : Buffer.alloc(0);
    const data = cookie ?? Buffer.alloc(0);
    const header = Buffer.alloc(12);
    header.write("l", 0, "latin1"); // little-endian
    header.writeUInt16LE(11, 2);
    header.writeUInt16LE(0, 4);
    header.writeUInt16LE(name.length, 6);
    header.writeUInt16LE(data.length, 8);
    this.socket.write(
      Buffer.concat([header, name, Buffer.alloc(pad4(name.length)), data, Buffer.alloc(pad4(data.length))]),
    );
    const reply = await this.read((b) => (b.length < 8 ? -1 : 8 + b.readUInt16LE(6) * 4));
    if (reply[0] !== 1) {
      const reason = reply
        .subarray(8, 8 + reply[1]!)
        .toString("latin1")
        .trim();
      throw new Error(`X display ${display} refused the connection: ${reason || "authorization required"}`);
    }
    const vendorLength = reply.readUInt16LE(24);
    const formats = reply[29]!;
    const rootsAt = 40 + vendorLength + pad4(vendorLength) + 8 * formats;
    this.root = reply.readUInt32LE(rootsAt);
  }

  private async request(body: Buffer): Promise<Buffer> {
    this.socket.write(body);
    this.sequence = (this.sequence + 1) & 0xffff;
    const reply = await this.read((b) =>
      b.length < 32 ? -1 : 32 + (b[0] === 1 ? b.readUInt32LE(4) * 4 : 0),
    );
    if (reply[0] === 0) throw new Error(`X error ${reply[1]} for request ${body[0]}`);
    return reply;
  }

  private async findScreenSaver(display: string): Promise<void> {
    const name = Buffer.from("MIT-SCREEN-SAVER", "latin1");
    const body = Buffer.alloc(8 + name.length + pad4(name.length));
    body[0] = 98; // QueryExtension
    body.writeUInt16LE(body.length / 4, 2);
    body.writeUInt16LE(name.length, 4);
    name.copy(body, 8);
    const reply = await this.request(body);
    if (reply[8] !== 1) throw new Error(`X display ${display} has no MIT-SCREEN-SAVER extension`);
    this.screenSaverOpcode = reply[9]!;
  }

  async msSinceUserInput(): Promise<number> {
    const body = Buffer.alloc(8);
    body[0] = this.screenSaverOpcode;
    body[1] = 1; // ScreenSaverQueryInfo
    body.writeUInt16LE(2, 2);
    body.writeUInt32LE(this.root, 4);
    const reply = await this.request(body);
    return reply.readUInt32LE(16);
  }

  close(): void {
    this.closedWith ??= new Error("closed");
    this.socket.destroy();
  }
}
