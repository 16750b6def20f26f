import { spawn } from "node:child_process";

export const money = (minor: number, currency: string) => `${(minor / 100).toFixed(2)} ${currency}`;

/** With --json the API's JSON is the only thing on stdout; otherwise the human lines. */
export function emit(json: boolean | undefined, body: unknown, text: () => string): void {
  process.stdout.write(json ? `${JSON.stringify(body, null, 2)}\n` : `${text()}\n`);
}

export const note = (line: string) => process.stderr.write(`${line}\n`);

/** One line of progress on stderr: rewritten in place on a terminal, a new line per change otherwise. */
export function progressLine(): { update(line: string, key: string): void; done(): void } {
  const tty = process.stderr.isTTY === true;
  let lastKey = "";
  let shown = false;
  return {
    update(line, key) {
      if (tty) {
        process.stderr.write(`\r\x1b[K${line}`);
        shown = true;
      } else if (key !== lastKey) {
        process.stderr.write(`${line}\n`);
      }
      lastKey = key;
    },
    done() {
      if (tty && shown) process.stderr.write("\n");
    },
  };
}

/** Opens a URL in the user's browser; failures are ignored (the URL is printed anyway). */
export function openInBrowser(url: string): void {
  const [cmd, args] =
    process.platform === "darwin"
      ? ["open", [url]]
      : process.platform === "win32"
        ? ["cmd", ["/c", "start", "", url]]
        : ["xdg-open", [url]];
  try {
    const child = spawn(cmd, args, { stdio: "ignore", detached: true });
    child.on("error", () => undefined);
    child.unref();
  } catch {
    // no opener on this machine
  }
}

export async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Reads one line from stdin after printing `prompt` on stderr. */
export async function ask(prompt: string): Promise<string> {
  process.stderr.write(prompt);
  let line = "";
  for await (const chunk of process.stdin) {
    line += (chunk as Buffer).toString("utf8");
    if (line.includes("\n")) break;
  }
  return line.split("\n")[0]!.trim();
}
