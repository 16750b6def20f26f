import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { Router, type RequestHandler } from "express";
import type { Logger } from "pino";

/** Where `npm run build` (gateway/scripts/build-api-reference.mjs) writes the page, from src/docs and dist/docs. */
export const API_REFERENCE_DIR = path.resolve(__dirname, "../../dist/api-reference");

export interface ApiReference {
  html: string;
  /** The page's scripts by file name (Redoc's bundle with the contract, the colour-mode switch). */
  scripts: Map<string, string>;
  /** The page's `style-src`: same-origin, plus exactly the inline styles Redoc pre-rendered, by hash. */
  styleSrc: string;
}

const sha256 = (text: string) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`;

const decodeAttribute = (value: string) =>
  value
    .replace(/&quot;/g, '"')
    .replace(/&#x27;|&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");

/**
 * The built page, or undefined when the workspace has not been built. Redoc pre-renders its styles as `<style>`
 * elements and a few `style` attributes; the CSP allows those and nothing else inline ('unsafe-hashes' lets a
 * hash match a `style` attribute, never a script). The styles Redoc adds once it runs go through the CSSOM
 * (insertRule, element.style), which the CSP does not govern; the empty `<style>` element it adds them to has the
 * empty string's hash.
 */
export function loadApiReference(dir = API_REFERENCE_DIR): ApiReference | undefined {
  const index = path.join(dir, "index.html");
  if (!existsSync(index)) return undefined;
  const html = readFileSync(index, "utf8");
  const inline = new Set<string>([""]);
  for (const m of html.matchAll(/<style\b[^>]*>([\s\S]*?)<\/style>/g)) inline.add(m[1] ?? "");
  for (const m of html.matchAll(/\sstyle="([^"]*)"/g)) inline.add(decodeAttribute(m[1] ?? ""));
  const scripts = new Map(
    readdirSync(dir)
      .filter((name) => name.endsWith(".js"))
      .map((name) => [name, readFileSync(path.join(dir, name), "utf8")] as const),
  );
  return { html, scripts, styleSrc: ["'self'", "'unsafe-hashes'", ...[...inline].map(sha256)].join(" ") };
}

/**
 * GET /docs/api: the API reference Redocly builds from shared/openapi.json, on the one origin. Its CSP is the
 * pages' policy with `style-src` widened to the page's own inline styles and `font-src` to data: URLs; scripts
 * stay same-origin only, and every other page keeps its own policy.
 */
export function apiReferenceRoutes(options: {
  logger: Logger;
  limit: RequestHandler;
  reference?: ApiReference;
}): Router {
  const router = Router();
  const reference = options.reference ?? loadApiReference();
  if (!reference) options.logger.error("the API reference is missing: build it (npm run build)");

  router.get("/docs/api", options.limit, (_req, res, next) => {
    if (!reference) {
      next();
      return;
    }
    const policy = String(res.getHeader("content-security-policy") ?? "");
    res.setHeader(
      "content-security-policy",
      policy
        .replace(/style-src [^;]*/, `style-src ${reference.styleSrc}`)
        // Redoc's stylesheet embeds its icon font as a data: URL.
        .replace(/font-src [^;]*/, "font-src 'self' data:"),
    );
    res.setHeader("Cache-Control", "no-cache");
    res.type("html").send(reference.html);
  });

  router.get("/docs/api/:file", options.limit, (req, res, next) => {
    const script = reference?.scripts.get(String(req.params.file));
    if (script === undefined) {
      next();
      return;
    }
    res.setHeader("Cache-Control", "no-cache");
    res.type("text/javascript; charset=utf-8").send(script);
  });
  return router;
}
