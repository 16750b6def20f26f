import { Command, InvalidArgumentError, Option } from "commander";
import { ApiError, type QueuePlace, type SessionStatus, type StartSessionRequest } from "@cgs/sdk";
import { InterruptedError, UsageError } from "../cli-errors";
import type { CliContext } from "../cli-context";
import { emit, note, progressLine } from "../terminal-output";
import { action } from "./command-action";
import { measuredSummary, regionList, regionOrAuto, wholeNumberIn } from "./region-commands";
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

export function ordinal(n: number): string {
  const tens = n % 100;
  if (tens >= 11 && tens <= 13) return `${n}th`;
  return `${n}${({ 1: "st", 2: "nd", 3: "rd" } as Record<number, string>)[n % 10] ?? "th"}`;
}

const aboutWait = (seconds: number) =>
  seconds < 45 ? "any moment now" : `about ${Math.max(1, Math.round(seconds / 60))} min`;

/** "3rd in line · about 4 min" */
export const placeInLine = (q: QueuePlace) =>
  `${ordinal(q.position)} in line · ${aboutWait(q.estimatedWaitSeconds)}`;

export function describeStatus(s: SessionStatus): string {
  const lines = [
    `State: ${s.state}${s.state === "running" ? (s.ready ? " (ready)" : " (not ready yet)") : ""}`,
  ];
  if (s.queue) {
    lines.push(
      `In line: ${placeInLine(s.queue)} (for ${s.queue.regions.join(", ")}; nothing is charged while you wait)`,
      "         Leave the line with `cgs session stop`.",
    );
  }
  if (s.warning) lines.push(`Warning: ${s.message ?? ""}${warningHint(s)}`);
  if (s.instanceId) lines.push(`Instance: ${s.instanceId}`);
  if (s.region) lines.push(`Region: ${s.region}`);
  if (s.privateNetIp) lines.push(`Private IP: ${s.privateNetIp}`);
  if (s.publicIp) lines.push(`Public IP: ${s.publicIp}`);
  // In line, nothing has started yet and the place above says what the message would.
  if (s.startedAt && !s.queue) lines.push(`Started: ${s.startedAt}`);
  if (s.stopReason) lines.push(`Stop reason: ${s.stopReason}`);
  if (s.message && !s.warning && !s.queue) lines.push(`Note: ${s.message}`);
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
      s.queue
        ? line.update(`queued · ${placeInLine(s.queue)}`, `queued:${placeInLine(s.queue)}`)
        : // The phase the platform names ("Starting a warm machine, about 30 s") follows the elapsed time.
          line.update(
            `${s.state} · ready: ${s.ready ? "yes" : "no"} · ${seconds(elapsedMs)}${s.message ? ` · ${s.message}` : ""}`,
            `${s.state}:${s.ready}:${s.message ?? ""}`,
          ),
    done: () => line.done(),
  };
};

interface StartOptions {
  wait?: boolean;
  timeout: number;
  region?: string;
  regions?: string[];
  maxRtt?: number;
  queue?: boolean;
}

/**
 * The start's body from the flags; with neither --region nor --regions, the `region` preference decides, and
 * only `auto` needs saying (the service applies any other preference itself).
 */
async function startRequest(ctx: CliContext, opts: StartOptions): Promise<StartSessionRequest> {
  // Flags that contradict each other are refused before anything is sent.
  if (opts.maxRtt !== undefined && (opts.regions || (opts.region && opts.region !== "auto")))
    throw new UsageError("--max-rtt applies only with --region auto");
  const body: StartSessionRequest = {};
  if (opts.regions) body.regions = opts.regions;
  else if (opts.region) body.region = opts.region;
  else if ((await ctx.client().settings.get()).region === "auto") body.region = "auto";
  if (opts.maxRtt !== undefined) {
    if (body.region !== "auto")
      throw new UsageError("--max-rtt applies only with --region auto (your region preference is not auto)");
    body.maxRttMs = opts.maxRtt;
  }
  if (opts.queue) body.queue = true;
  return body;
}

/**
 * Waits while the session is in line. Ctrl-C asks nothing and leaves the session in line: it says how to leave
 * (a stop), since leaving by accident would lose the place.
 */
async function waitInLine(
  ctx: CliContext,
  p: ReturnType<typeof progress>,
  first: SessionStatus,
): Promise<SessionStatus> {
  let last = first;
  // Listening before the place is shown: a Ctrl-C at the sight of it must find the handler.
  const interrupted = new AbortController();
  const onInterrupt = () => interrupted.abort();
  process.once("SIGINT", onInterrupt);
  try {
    p.onProgress(first, 0);
    return await ctx.client().sessions.waitWhileQueued({
      signal: interrupted.signal,
      onProgress: (s, ms) => {
        last = s;
        // Out of the line, the elapsed time counts from now (the start's own wait begins).
        p.onProgress(s, s.queue ? ms : 0);
      },
    });
  } catch (err) {
    if (!interrupted.signal.aborted) throw err;
    p.done();
    throw new InterruptedError(
      `Still in line${last.queue ? ` (${placeInLine(last.queue)})` : ""}; your place is kept and nothing is charged.\n` +
        "Leave the line with `cgs session stop`; follow it with `cgs session status` or `cgs session start --wait`.",
    );
  } finally {
    process.removeListener("SIGINT", onInterrupt);
  }
}

export function sessionCommands(program: Command): void {
  const session = program
    .command("session")
    .description("Start, inspect, pair with and stop your game session");

  session
    .command("start")
    .description("Start your session (it is billed per minute while it runs)")
    .addOption(
      new Option(
        "--region <id|auto>",
        "a region from `cgs regions`, or auto: the nearest measured within --max-rtt (default: your region preference)",
      )
        .argParser(regionOrAuto)
        .conflicts("regions"),
    )
    .option(
      "--regions <ids>",
      "regions to try in order, comma-separated; the first with capacity is taken",
      regionList,
    )
    .option(
      "--max-rtt <ms>",
      "with auto: the highest acceptable round trip, in ms (default 150)",
      wholeNumberIn(1, 2000, "milliseconds"),
    )
    .option(
      "--queue",
      "when every allowed region is full, wait in line (free while queued) instead of failing",
    )
    .option("--wait", "wait until the session is ready, showing its progress (and its place in line)")
    .option(
      "--timeout <seconds>",
      "with --wait, give up after this many seconds (not counting time in line)",
      timeoutSeconds,
      600,
    )
    .action(
      action(async (ctx, opts: StartOptions) => {
        const body = await startRequest(ctx, opts);
        const client = ctx.client();
        if (body.region === "auto") note("Measuring your round trip to each region…");
        let started: SessionStatus;
        try {
          started = await client.sessions.start(body, {
            onMeasured: (measured) => note(`Measured: ${measuredSummary(measured)}`),
          });
        } catch (err) {
          if (err instanceof ApiError && err.code === "CLOUD_CAPACITY" && !opts.queue) {
            throw new ApiError({
              code: err.code,
              status: err.status,
              message: err.message.includes("queue: true")
                ? err.message.replace("start with queue: true", "add --queue")
                : `${err.message.replace(/\.$/, "")}. Add --queue to wait in line (nothing is charged while you wait)`,
              ...(err.retryAfter !== undefined ? { retryAfter: err.retryAfter } : {}),
              ...(err.requestId !== undefined ? { requestId: err.requestId } : {}),
            });
          }
          throw err;
        }
        if (!opts.wait) {
          emit(ctx.options.json, started, () =>
            started.queue
              ? `Queued · ${placeInLine(started.queue)} (for ${started.queue.regions.join(", ")}). Nothing is charged while you wait.\n` +
                "Follow it with `cgs session status` (or start with --wait); leave the line with `cgs session stop`."
              : `Session ${started.state}${started.region ? ` in ${started.region}` : ""}. Run \`cgs session status\` to follow it, or start with --wait.`,
          );
          return;
        }
        const p = progress();
        try {
          const afterLine = started.state === "queued" ? await waitInLine(ctx, p, started) : started;
          const began = Date.now();
          const ready =
            afterLine.state === "running" && afterLine.ready
              ? afterLine
              : await client.sessions.waitUntilReady({
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
