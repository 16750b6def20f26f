import { Command, InvalidArgumentError } from "commander";
import type { SessionStatus } from "@cgs/sdk";
import { emit, progressLine } from "../terminal-output";
import { action } from "./command-action";
import { simulatedPlay } from "./simulated-play";

const seconds = (ms: number) => `${Math.round(ms / 1000)} s`;

/** What to do about a warning, said the way the player would do it from here. */
function warningHint(s: SessionStatus): string {
  if (!s.warning) return "";
  if (s.warning.canKeepPlaying)
    return "\n         Play in your streaming client, or run `cgs session keepalive`.";
  if (s.warning.kind === "credits") return "\n         Top up with `cgs credits topup AMOUNT --open`.";
  if (s.warning.kind === "spend_limit")
    return "\n         Raise it with `cgs credits limits set --daily CENTS` (or --monthly).";
  return "";
}

export function describeStatus(s: SessionStatus): string {
  const lines = [
    `State: ${s.state}${s.state === "running" ? (s.ready ? " (ready)" : " (not ready yet)") : ""}`,
  ];
  if (s.warning) lines.push(`Warning: ${s.message ?? ""}${warningHint(s)}`);
  if (s.instanceId) lines.push(`Instance: ${s.instanceId}`);
  if (s.privateNetIp) lines.push(`Private IP: ${s.privateNetIp}`);
  if (s.publicIp) lines.push(`Public IP: ${s.publicIp}`);
  if (s.startedAt) lines.push(`Started: ${s.startedAt}`);
  if (s.stopReason) lines.push(`Stop reason: ${s.stopReason}`);
  if (s.message && !s.warning) lines.push(`Note: ${s.message}`);
  return lines.join("\n");
}

const timeoutSeconds = (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1)
    throw new InvalidArgumentError("must be a whole number of seconds, at least 1");
  return n;
};

const progress = () => {
  const line = progressLine();
  return {
    onProgress: (s: SessionStatus, elapsedMs: number) =>
      // The phase the platform names ("Starting a warm machine, about 30 s") follows the elapsed time.
      line.update(
        `${s.state} · ready: ${s.ready ? "yes" : "no"} · ${seconds(elapsedMs)}${s.message ? ` · ${s.message}` : ""}`,
        `${s.state}:${s.ready}:${s.message ?? ""}`,
      ),
    done: () => line.done(),
  };
};

export function sessionCommands(program: Command): void {
  const session = program
    .command("session")
    .description("Start, inspect, pair with and stop your game session");

  session
    .command("start")
    .description("Start your session (it is billed per minute while it runs)")
    .option("--wait", "wait until the session is ready, showing its progress")
    .option("--timeout <seconds>", "with --wait, give up after this many seconds", timeoutSeconds, 600)
    .action(
      action(async (ctx, opts: { wait?: boolean; timeout: number }) => {
        const client = ctx.client();
        const started = await client.sessions.start();
        if (!opts.wait) {
          emit(
            ctx.options.json,
            started,
            () => `Session ${started.state}. Run \`cgs session status\` to follow it, or start with --wait.`,
          );
          return;
        }
        const p = progress();
        const began = Date.now();
        try {
          const ready = await client.sessions.waitUntilReady({
            onProgress: p.onProgress,
            timeoutMs: opts.timeout * 1000,
          });
          p.done();
          emit(
            ctx.options.json,
            ready,
            () =>
              `Session ready after ${seconds(Date.now() - began)}.\n${describeStatus(ready)}\nNext: cgs session pair`,
          );
        } catch (err) {
          p.done();
          throw err;
        }
      }),
    );

  session
    .command("status")
    .description("Show the session's state and readiness")
    .action(
      action(async (ctx) => {
        const status = await ctx.client().sessions.poll();
        emit(ctx.options.json, status, () => describeStatus(status));
      }),
    );

  session
    .command("pair")
    .description("Get a four-digit PIN to pair your streaming client (it stays paired across sessions)")
    .option("--name <device>", "the name the device pairs under (see `cgs devices`)")
    .action(
      action(async (ctx, opts: { name?: string }) => {
        const pin = await ctx.client().sessions.pair(opts.name ? { deviceName: opts.name } : {});
        emit(
          ctx.options.json,
          pin,
          () => `PIN: ${pin.pin} (enter it in your streaming client; expires ${pin.expiresAt})`,
        );
      }),
    );

  session
    .command("connect")
    .description("Show the private-network address of the streaming server")
    .action(
      action(async (ctx) => {
        const info = await ctx.client().sessions.connect();
        emit(ctx.options.json, info, () => `${info.privateNetIp}:${info.port}`);
      }),
    );

  session
    .command("vpn-key")
    .description("Create a short-lived private-network key for this session")
    .action(
      action(async (ctx) => {
        const key = await ctx.client().sessions.vpnKey();
        emit(ctx.options.json, key, () => `${key.key}\n(expires ${key.expiresAt})`);
      }),
    );

  session
    .command("keepalive")
    .description("Keep playing: postpone an idle or maximum-length stop (never a stop for lack of credit)")
    .action(
      action(async (ctx) => {
        const status = await ctx.client().sessions.keepalive();
        emit(ctx.options.json, status, () =>
          status.warning
            ? describeStatus(status)
            : "Keep playing: the idle clock starts again now.\n" + describeStatus(status),
        );
      }),
    );

  simulatedPlay(session);

  session
    .command("stop")
    .description("Stop your session")
    .option("--wait", "wait until the instance is gone")
    .option("--timeout <seconds>", "with --wait, give up after this many seconds", timeoutSeconds, 300)
    .action(
      action(async (ctx, opts: { wait?: boolean; timeout: number }) => {
        const client = ctx.client();
        const stopping = await client.sessions.stop();
        if (!opts.wait) {
          emit(ctx.options.json, stopping, () => `Session ${stopping.state}.`);
          return;
        }
        const p = progress();
        try {
          const stopped = await client.sessions.waitUntilStopped({
            onProgress: p.onProgress,
            timeoutMs: opts.timeout * 1000,
          });
          p.done();
          emit(ctx.options.json, stopped, () => `Session ${stopped.state}.`);
        } catch (err) {
          p.done();
          throw err;
        }
      }),
    );
}
