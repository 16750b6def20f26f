import { Command, InvalidArgumentError } from "commander";
import type { SessionStatus } from "@cgs/sdk";
import { UsageError } from "../cli-errors";
import { emit, note } from "../terminal-output";
import { action } from "./command-action";

const positiveSeconds = (value: string) => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("must be a number of seconds above 0");
  return n;
};

/** The local cloud simulator's control route for the instance's pretend streaming client and display. */
async function tellSimulator(
  simulatorUrl: string,
  instanceId: string,
  body: { connected?: boolean; input?: boolean },
): Promise<{ clientsConnected: number; lastInputAt: string }> {
  const url = `${simulatorUrl.replace(/\/+$/, "")}/internal/v1/simulator/instances/${instanceId}/play`;
  let res: Response;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(5_000),
    });
  } catch {
    throw new UsageError(
      `could not reach the cloud simulator at ${simulatorUrl}: --simulate works only against \`npm start\` ` +
        "(its sessions service, port 8101 by default; pass --simulator-url)",
    );
  }
  if (res.status === 404) {
    throw new UsageError(
      `the cloud simulator at ${simulatorUrl} has no running host for ${instanceId}: is this session on the local platform?`,
    );
  }
  if (!res.ok) throw new Error(`the cloud simulator answered HTTP ${res.status}`);
  return (await res.json()) as { clientsConnected: number; lastInputAt: string };
}

/**
 * `cgs session play --simulate`: a pretend streaming client for `npm start`. It connects to the session's simulated
 * instance and sends input on its display now and then; the instance's host agent (the real code) reports it, so
 * the session stays alive with no API call, and Ctrl-C (or `--disconnect`) leaves, after which the idle warning
 * and the idle stop follow as they would on a real instance.
 */
export function simulatedPlay(session: Command): void {
  session
    .command("play")
    .description("Local platform only: pretend to play on the session (a streaming client and input)")
    .requiredOption("--simulate", "use the local cloud simulator's pretend streaming client (required)")
    .option(
      "--simulator-url <url>",
      "the local sessions service",
      process.env.CGS_SIMULATOR_URL ?? "http://127.0.0.1:8101",
    )
    .option("--input-every <seconds>", "send input this often", positiveSeconds, 20)
    .option("--no-input", "stay connected without touching the display")
    .option("--disconnect", "leave: disconnect the pretend streaming client and exit")
    .action(
      action(
        async (
          ctx,
          opts: { simulatorUrl: string; inputEvery: number; input: boolean; disconnect?: boolean },
        ) => {
          const client = ctx.client();
          const status: SessionStatus = await client.sessions.poll();
          if (status.state !== "running" || !status.instanceId) {
            throw new UsageError(`there is no running session to play on (state: ${status.state})`);
          }
          const instanceId = status.instanceId;
          if (opts.disconnect) {
            const left = await tellSimulator(opts.simulatorUrl, instanceId, { connected: false });
            emit(
              ctx.options.json,
              left,
              () => `Disconnected the pretend streaming client from ${instanceId}.`,
            );
            return;
          }
          const joined = await tellSimulator(opts.simulatorUrl, instanceId, {
            connected: true,
            input: opts.input,
          });
          emit(
            ctx.options.json,
            joined,
            () =>
              `Playing on ${instanceId}: a pretend streaming client is connected` +
              (opts.input ? `, with input every ${opts.inputEvery} s` : ", without input") +
              ". Ctrl-C disconnects it.",
          );
          let stopping = false;
          const stop = new Promise<void>((resolve) => {
            process.once("SIGINT", () => {
              stopping = true;
              resolve();
            });
          });
          let lastCheck = Date.now();
          while (!stopping) {
            await Promise.race([stop, new Promise((r) => setTimeout(r, opts.inputEvery * 1000))]);
            if (stopping) break;
            if (opts.input) await tellSimulator(opts.simulatorUrl, instanceId, { input: true });
            // Looks at the session now and then (well within the poll limit) to leave when it ends.
            if (Date.now() - lastCheck >= 30_000) {
              lastCheck = Date.now();
              const now = await client.sessions.poll();
              if (now.state !== "running") {
                note(`The session is ${now.state}${now.message ? `: ${now.message}` : ""}`);
                return;
              }
            }
          }
          await tellSimulator(opts.simulatorUrl, instanceId, { connected: false });
          note(`Disconnected the pretend streaming client from ${instanceId}.`);
        },
      ),
    );
}
