import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { freePort } from "./ports";

/** A redis-server of the test's own on a free port, so a fault test can stop, hang or kill it without touching the shared peer. */
export interface OwnRedis {
  url: string;
  port: number;
  /** SIGSTOP: the socket stays open and nothing answers (a hung Redis). */
  hang(): void;
  /** SIGCONT after hang(). */
  resume(): void;
  /** SIGKILL, then waits for the exit. */
  kill(): Promise<void>;
  /** Starts a fresh redis-server on the same port (empty: it keeps nothing on disk). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

async function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (d) => done(d.toString().startsWith("+PONG")));
  });
}

export async function startOwnRedis(bin = process.env.REDIS_SERVER_BIN ?? "redis-server"): Promise<OwnRedis> {
  const port = await freePort();
  let child: ChildProcess;
  const launch = async (): Promise<void> => {
    child = spawn(
      bin,
      [
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
      ],
      { stdio: "ignore" },
    );
    const deadline = Date.now() + 10_000;
    while (!(await answersPing(port))) {
      if (child.exitCode !== null)
        throw new Error(`${bin} exited with ${child.exitCode} (is redis-server installed?)`);
      if (Date.now() > deadline) throw new Error(`${bin} did not answer on port ${port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const kill = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGCONT");
    child.kill("SIGKILL");
    await exited;
  };
  await launch();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    hang: () => child.kill("SIGSTOP"),
    resume: () => child.kill("SIGCONT"),
    kill,
    restart: launch,
    stop: kill,
  };
}
