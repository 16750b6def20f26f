import { Router } from "express";

export interface PasswordResetHandlers {
  request(body: unknown): Promise<void>;
  complete(body: unknown): Promise<void>;
}

/** The two public password-reset endpoints (no bearer token). */
export function passwordResetRoutes(handlers: PasswordResetHandlers): Router {
  const router = Router();
  router.post("/auth/password-reset/request", async (req, res) => {
    await handlers.request(req.body);
    res.setHeader("Cache-Control", "no-store");
    res.status(200).json({ ok: true });
  });
  router.post("/auth/password-reset/complete", async (req, res) => {
    await handlers.complete(req.body);
    res.setHeader("Cache-Control", "no-store");
    res.status(200).json({ ok: true });
  });
  return router;
}
