// A small SMTP catcher standing in for Mailpit where Mailpit cannot be installed: it accepts every message on
// SMTP, keeps the newest ones in memory and serves the subset of Mailpit's /api/v1 the tests read, with Mailpit's
// JSON field names so a real Mailpit can replace it.
//
//   MAILPIT_SMTP_PORT=1025 MAILPIT_HTTP_PORT=8025 node test/peers/mail-catcher.mjs
//
// Optional: MAILPIT_HOST (127.0.0.1), MAILPIT_MAX_MESSAGES (1000), MAILPIT_MAX_SIZE bytes (10 MiB). Port 0 picks a
// free port; the line `mail-catcher ready {"smtpPort":…,"httpPort":…}` on stdout says which.
import { randomBytes } from "node:crypto";
import http from "node:http";
import { SMTPServer } from "smtp-server";
import { simpleParser } from "mailparser";

const VERSION = "cgs-mail-catcher 1.0.0";
const MAX_JSON_BODY = 1024 * 1024;
const SNIPPET_LENGTH = 250;

const log = (line) => process.stdout.write(`${new Date().toISOString()} mail-catcher ${line}\n`);

function readConfig(env) {
  const int = (name, fallback, min) => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min)
      throw new Error(`${name} must be an integer >= ${min}, got "${raw}"`);
    return value;
  };
  return {
    host: env.MAILPIT_HOST || "127.0.0.1",
    smtpPort: int("MAILPIT_SMTP_PORT", 1025, 0),
    httpPort: int("MAILPIT_HTTP_PORT", 8025, 0),
    maxMessages: int("MAILPIT_MAX_MESSAGES", 1000, 1),
    maxSize: int("MAILPIT_MAX_SIZE", 10 * 1024 * 1024, 1024),
  };
}

// ---------------------------------------------------------------- store

function createStore(maxMessages) {
  /** Oldest first; the API answers newest first. */
  const messages = [];
  return {
    add(message) {
      messages.push(message);
      if (messages.length > maxMessages) messages.splice(0, messages.length - maxMessages);
    },
    /** Newest first. */
    list: () => messages.slice().reverse(),
    get: (id) => (id === "latest" ? messages[messages.length - 1] : messages.find((m) => m.ID === id)),
    count: () => messages.length,
    remove(ids) {
      const drop = new Set(ids);
      const kept = messages.filter((m) => !drop.has(m.ID));
      const removed = messages.length - kept.length;
      messages.splice(0, messages.length, ...kept);
      return removed;
    },
    clear() {
      messages.length = 0;
    },
  };
}

const newId = () => randomBytes(16).toString("base64url").slice(0, 22);

const addresses = (field) => {
  if (!field) return [];
  const groups = Array.isArray(field) ? field : [field];
  const out = [];
  const walk = (list) => {
    for (const entry of list ?? []) {
      if (entry.group) walk(entry.group);
      else if (entry.address || entry.name)
        out.push({ Name: entry.name ?? "", Address: entry.address ?? "" });
    }
  };
  for (const group of groups) walk(group.value);
  return out;
};

const snippetOf = (text) => {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > SNIPPET_LENGTH ? `${flat.slice(0, SNIPPET_LENGTH)}...` : flat;
};

async function toMessage(raw, envelope) {
  let parsed;
  try {
    parsed = await simpleParser(raw, { skipImageLinks: true });
  } catch (err) {
    log(`could not parse a message (${err instanceof Error ? err.message : String(err)}); keeping it raw`);
    parsed = {};
  }
  const from = addresses(parsed.from)[0] ?? { Name: "", Address: envelope.mailFrom?.address ?? "" };
  const to = addresses(parsed.to);
  const cc = addresses(parsed.cc);
  const listed = new Set([...to, ...cc].map((a) => a.Address.toLowerCase()));
  // Like Mailpit: envelope recipients missing from the headers were Bcc'd.
  const bcc = envelope.rcptTo
    .map((r) => r.address)
    .filter((address) => !listed.has(address.toLowerCase()))
    .map((address) => ({ Name: "", Address: address }));
  const text = typeof parsed.text === "string" ? parsed.text : "";
  const html = typeof parsed.html === "string" ? parsed.html : "";
  const created = new Date();
  return {
    ID: newId(),
    MessageID: (parsed.messageId ?? "").replace(/^<|>$/g, ""),
    From: from,
    To: to,
    Cc: cc,
    Bcc: bcc,
    ReplyTo: addresses(parsed.replyTo),
    ReturnPath: envelope.mailFrom ? envelope.mailFrom.address : "",
    Subject: parsed.subject ?? "",
    Date: (parsed.date instanceof Date && !Number.isNaN(parsed.date.getTime())
      ? parsed.date
      : created
    ).toISOString(),
    Created: created.toISOString(),
    Text: text,
    HTML: html,
    Size: raw.length,
    Attachments: (parsed.attachments ?? []).length,
    raw,
  };
}

const summaryOf = (m) => ({
  ID: m.ID,
  MessageID: m.MessageID,
  Read: false,
  From: m.From,
  To: m.To,
  Cc: m.Cc,
  Bcc: m.Bcc,
  ReplyTo: m.ReplyTo,
  Subject: m.Subject,
  Created: m.Created,
  Tags: [],
  Size: m.Size,
  Attachments: m.Attachments,
  Snippet: snippetOf(m.Text),
});

const detailOf = (m) => ({
  ID: m.ID,
  MessageID: m.MessageID,
  From: m.From,
  To: m.To,
  Cc: m.Cc,
  Bcc: m.Bcc,
  ReplyTo: m.ReplyTo,
  ReturnPath: m.ReturnPath,
  Subject: m.Subject,
  Date: m.Date,
  Tags: [],
  Text: m.Text,
  HTML: m.HTML,
  Size: m.Size,
  Inline: [],
  Attachments: [],
});

// ---------------------------------------------------------------- search

/** Splits a Mailpit-style query into terms; `field:"quoted value"` and `"quoted words"` stay whole. */
function parseQuery(query) {
  const terms = [];
  const re = /(-|!)?(?:([a-z-]+):)?(?:"([^"]*)"|(\S+))/gi;
  for (const match of query.matchAll(re)) {
    const value = (match[3] ?? match[4] ?? "").toLowerCase();
    if (value === "") continue;
    terms.push({ negate: Boolean(match[1]), field: (match[2] ?? "").toLowerCase(), value });
  }
  return terms;
}

const addressText = (list) => list.map((a) => `${a.Name} <${a.Address}>`.toLowerCase()).join(" ");

function termMatches(m, { field, value }) {
  switch (field) {
    case "to":
      return addressText([...m.To, ...m.Cc, ...m.Bcc]).includes(value);
    case "from":
      return addressText([m.From]).includes(value);
    case "cc":
      return addressText(m.Cc).includes(value);
    case "bcc":
      return addressText(m.Bcc).includes(value);
    case "subject":
      return m.Subject.toLowerCase().includes(value);
    case "message-id":
      return m.MessageID.toLowerCase().includes(value);
    case "":
      return [m.Subject, m.Text, addressText([m.From, ...m.To, ...m.Cc])].some((s) =>
        s.toLowerCase().includes(value),
      );
    default:
      // Unknown field (e.g. `is:read`, `tag:`): treat the whole term as plain words, as Mailpit does for text.
      return termMatches(m, { field: "", value: `${field}:${value}` });
  }
}

const search = (messages, query) => {
  const terms = parseQuery(query);
  return messages.filter((m) => terms.every((t) => termMatches(m, t) !== t.negate));
};

// ---------------------------------------------------------------- HTTP API

class HttpError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function send(res, status, body) {
  if (res.headersSent) return;
  const isText = typeof body === "string";
  const payload = isText ? body : JSON.stringify(body);
  res.writeHead(status, {
    "content-type": isText ? "text/plain; charset=utf-8" : "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(payload),
    "cache-control": "no-store",
  });
  res.end(payload);
}

async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_JSON_BODY) throw new HttpError(413, "PAYLOAD_TOO_LARGE", "request body is too large");
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, "BAD_REQUEST", "request body is not valid JSON");
  }
}

function page(url, list) {
  const int = (name, fallback) => {
    const raw = url.searchParams.get(name);
    if (raw === null || raw === "") return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 0) {
      throw new HttpError(400, "BAD_REQUEST", `${name} must be a non-negative integer`);
    }
    return value;
  };
  const start = int("start", 0);
  const limit = int("limit", 50);
  const slice = list.slice(start, limit === 0 ? undefined : start + limit);
  return { start, slice };
}

function createApi(store) {
  const listing = (url, matched, total) => {
    const { start, slice } = page(url, matched);
    return {
      total,
      unread: 0,
      count: slice.length,
      messages_count: matched.length,
      start,
      tags: [],
      messages: slice.map(summaryOf),
    };
  };

  const deleteIds = async (req) => {
    const body = await readJson(req);
    if (body === undefined || body === null) return store.clear();
    if (typeof body !== "object" || Array.isArray(body)) {
      throw new HttpError(400, "BAD_REQUEST", 'body must be {"IDs": [...]}');
    }
    const ids = body.IDs ?? body.ids;
    if (ids === undefined || (Array.isArray(ids) && ids.length === 0)) return store.clear();
    if (!Array.isArray(ids) || !ids.every((id) => typeof id === "string")) {
      throw new HttpError(400, "BAD_REQUEST", "IDs must be an array of strings");
    }
    store.remove(ids);
  };

  const routes = [
    {
      path: /^\/(livez|readyz)$/,
      GET: () => [200, "ok"],
    },
    {
      path: /^\/api\/v1\/info$/,
      GET: () => [200, { Version: VERSION, LatestVersion: "", Messages: store.count(), Unread: 0, Tags: {} }],
    },
    {
      path: /^\/api\/v1\/messages$/,
      GET: (_req, url) => [200, listing(url, store.list(), store.count())],
      DELETE: async (req) => {
        await deleteIds(req);
        return [200, "ok"];
      },
    },
    {
      path: /^\/api\/v1\/search$/,
      GET: (_req, url) => [
        200,
        listing(url, search(store.list(), url.searchParams.get("query") ?? ""), store.count()),
      ],
      DELETE: (_req, url) => {
        const query = url.searchParams.get("query") ?? "";
        if (query.trim() === "") throw new HttpError(400, "BAD_REQUEST", "query is required");
        store.remove(search(store.list(), query).map((m) => m.ID));
        return [200, "ok"];
      },
    },
    {
      path: /^\/api\/v1\/message\/([^/]+)$/,
      GET: (_req, _url, [id]) => {
        const message = store.get(id);
        if (!message) throw new HttpError(404, "NOT_FOUND", "message not found");
        return [200, detailOf(message)];
      },
    },
    {
      path: /^\/api\/v1\/message\/([^/]+)\/raw$/,
      GET: (_req, _url, [id]) => {
        const message = store.get(id);
        if (!message) throw new HttpError(404, "NOT_FOUND", "message not found");
        return [200, message.raw.toString("utf8")];
      },
    },
  ];

  return async (req, res) => {
    try {
      const url = new URL(req.url ?? "/", "http://catcher.local");
      let pathname;
      try {
        pathname = decodeURIComponent(url.pathname);
      } catch {
        throw new HttpError(400, "BAD_REQUEST", "malformed path");
      }
      for (const route of routes) {
        const match = route.path.exec(pathname);
        if (!match) continue;
        const handler = route[req.method === "HEAD" ? "GET" : (req.method ?? "")];
        if (!handler) throw new HttpError(405, "METHOD_NOT_ALLOWED", `${req.method} is not allowed here`);
        const [status, body] = await handler(req, url, match.slice(1));
        return send(res, status, body);
      }
      throw new HttpError(404, "NOT_FOUND", `no route for ${req.method} ${pathname}`);
    } catch (err) {
      if (err instanceof HttpError) return send(res, err.status, { error: err.code, message: err.message });
      log(`request ${req.method} ${req.url} failed: ${err instanceof Error ? err.stack : String(err)}`);
      send(res, 500, { error: "INTERNAL", message: "internal error" });
    }
  };
}

// ---------------------------------------------------------------- SMTP

function createSmtp(store, maxSize) {
  const server = new SMTPServer({
    name: "mail-catcher",
    banner: VERSION,
    secure: false,
    authOptional: true,
    // Like Mailpit's --smtp-auth-accept-any --smtp-auth-allow-insecure: clients configured with credentials work.
    allowInsecureAuth: true,
    disabledCommands: ["STARTTLS"],
    hideSTARTTLS: true,
    size: maxSize,
    logger: false,
    closeTimeout: 2000,
    onAuth: (auth, _session, callback) => callback(null, { user: auth.username ?? "anonymous" }),
    onData(stream, session, callback) {
      const chunks = [];
      stream.on("data", (chunk) => {
        if (!stream.sizeExceeded) chunks.push(chunk);
      });
      stream.on("error", (err) => callback(err));
      stream.on("end", () => {
        if (stream.sizeExceeded) {
          const err = new Error(`message exceeds the fixed maximum size of ${maxSize} bytes`);
          err.responseCode = 552;
          return callback(err);
        }
        toMessage(Buffer.concat(chunks), session.envelope)
          .then((message) => {
            store.add(message);
            log(
              `received ${message.ID} to=${message.To.map((a) => a.Address).join(",")} subject=${JSON.stringify(message.Subject)}`,
            );
            callback(null, `Ok: queued as ${message.ID}`);
          })
          .catch((err) => {
            log(`could not store a message: ${err instanceof Error ? err.message : String(err)}`);
            const reply = new Error("temporary failure storing the message");
            reply.responseCode = 451;
            callback(reply);
          });
      });
    },
  });
  server.on("error", (err) => log(`smtp error: ${err instanceof Error ? err.message : String(err)}`));
  return server;
}

// ---------------------------------------------------------------- main

const listen = (server, port, host) =>
  new Promise((resolve, reject) => {
    const onError = (err) => reject(err);
    (server.server ?? server).once("error", onError);
    server.listen(port, host, () => {
      (server.server ?? server).off("error", onError);
      resolve((server.server ?? server).address().port);
    });
  });

async function main() {
  const config = readConfig(process.env);
  const store = createStore(config.maxMessages);
  const smtp = createSmtp(store, config.maxSize);
  const httpServer = http.createServer(createApi(store));
  httpServer.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });

  const smtpPort = await listen(smtp, config.smtpPort, config.host);
  const httpPort = await listen(httpServer, config.httpPort, config.host);
  log(`ready ${JSON.stringify({ smtpPort, httpPort, host: config.host, maxMessages: config.maxMessages })}`);

  let stopping = false;
  const stop = (signal) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: stopping`);
    setTimeout(() => {
      log("did not stop in time; exiting");
      process.exit(1);
    }, 5000).unref();
    httpServer.closeAllConnections();
    Promise.all([
      new Promise((resolve) => httpServer.close(() => resolve())),
      new Promise((resolve) => smtp.close(() => resolve())),
    ]).then(() => {
      log("stopped");
      process.exit(0);
    });
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  // A peer for tests should outlive a bug triggered by one odd message or request; the log says what happened.
  process.on("uncaughtException", (err) =>
    log(`uncaught: ${err instanceof Error ? err.stack : String(err)}`),
  );
  process.on("unhandledRejection", (err) =>
    log(`unhandled: ${err instanceof Error ? err.stack : String(err)}`),
  );
  process.on("SIGINT", () => stop("SIGINT"));
}

main().catch((err) => {
  log(`failed to start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
