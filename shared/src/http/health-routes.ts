import { Router } from "express";

export interface ReadinessCheck {
  name: string;
  /** Resolves when the dependency is reachable; a rejection or `false` marks it failed. */
  check: () => Promise<unknown> | unknown;
  timeoutMs?: number;
}

export interface ReadinessResult {
  ready: boolean;
  checks: Record<string, "ok" | "failed">;
  failed: string[];
}

export async function runReadinessChecks(checks: ReadinessCheck[]): Promise<ReadinessResult> {
  const results = await Promise.all(
    checks.map(async (c) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<false>((resolve) => {
        timer = setTimeout(() => resolve(false), c.timeoutMs ?? 2000);
      });
      try {
        const value = await Promise.race([Promise.resolve().then(c.check), timeout]);
        return [c.name, value !== false] as const;
      } catch {
        return [c.name, false] as const;
      } finally {
        clearTimeout(timer);
      }
    }),
  );
  const failed = results.filter(([, ok]) => !ok).map(([name]) => name);
  return {
    ready: failed.length === 0,
    checks: Object.fromEntries(results.map(([name, ok]) => [name, ok ? "ok" : "failed"])),
    failed,
  };
}

/** GET /healthz: the process is alive. GET /readyz: every injected dependency check passes, else 503 naming the failed ones. */
export function healthRoutes(readiness: ReadinessCheck[] = []): Router {
  const router = Router();
  router.get("/healthz", (_req, res) => {
    res.setHeader("Cache-Control", "no-store");
    res.json({ status: "ok" });
  });
  router.get("/readyz", async (_req, res) => {
    const result = await runReadinessChecks(readiness);
    res.setHeader("Cache-Control", "no-store");
    if (result.ready) {
      res.json({ status: "ok", checks: result.checks });
    } else {
      res.status(503).json({
        error: "UNAVAILABLE",
        message: `Not ready: ${result.failed.join(", ")}`,
        checks: result.checks,
      });
    }
  });
  return router;
}
