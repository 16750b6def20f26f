import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";

export interface Xvfb {
  display: string;
  /** Runs xdotool on this display (Debian `xdotool`): real input the X server counts as user activity. */
  xdotool(...args: string[]): void;
  stop(): Promise<void>;
}

/** A real X server (Debian `xvfb`) on a display number nobody else uses; `-auth` makes it ask for a cookie. */
export async function startXvfb(options: { authFile?: string } = {}): Promise<Xvfb> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const n = 100 + Math.floor(Math.random() * 800);
    if (existsSync(`/tmp/.X11-unix/X${n}`) || existsSync(`/tmp/.X${n}-lock`)) continue;
    const child: ChildProcess = spawn(
      "Xvfb",
      [
        `:${n}`,
        "-screen",
        "0",
        "1280x720x24",
        "-nolisten",
        "tcp",
        ...(options.authFile ? ["-auth", options.authFile] : []),
      ],
      { stdio: "ignore" },
    );
    const deadline = Date.now() + 10_000;
    while (!existsSync(`/tmp/.X11-unix/X${n}`) && child.exitCode === null && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    if (child.exitCode !== null || !existsSync(`/tmp/.X11-unix/X${n}`)) {
      child.kill("SIGKILL");
      continue; // another process took the number first
    }
    const display = `:${n}`;
    return {
      display,
      xdotool(...args: string[]) {
        const env = {
          ...process.env,
          DISPLAY: display,
          ...(options.authFile ? { XAUTHORITY: options.authFile } : {}),
        };
        const result = spawnSync("xdotool", args, { env, encoding: "utf8" });
        if (result.status !== 0) throw new Error(`xdotool ${args.join(" ")} failed: ${result.stderr}`);
      },
      stop: () =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null) return resolve();
          child.once("exit", () => resolve());
          child.kill("SIGTERM");
        }),
    };
  }
  throw new Error("could not start Xvfb (is Debian's xvfb installed?)");
}

/** An Xauthority file holding one MIT-MAGIC-COOKIE-1 for the display (the format Xvfb -auth and libXau read). */
export function xauthorityEntry(host: string, displayNumber: number, cookie: Buffer): Buffer {
  const field = (value: Buffer) => {
    const length = Buffer.alloc(2);
    length.writeUInt16BE(value.length);
    return Buffer.concat([length, value]);
  };
  const family = Buffer.alloc(2);
  family.writeUInt16BE(256); // FamilyLocal
  return Buffer.concat([
    family,
    field(Buffer.from(host, "latin1")),
    field(Buffer.from(String(displayNumber), "latin1")),
    field(Buffer.from("MIT-MAGIC-COOKIE-1", "latin1")),
    field(cookie),
  ]);
}
