import express, { type Express } from "express";
import * as OpenApiValidator from "express-openapi-validator";
import request from "supertest";
import { loadOpenApiDocument } from "@cgs/shared";

let validatorApp: Express | undefined;
let pending: { status: number; body: unknown } | undefined;

/**
 * Checks a response against shared/openapi.json with express-openapi-validator's response validation:
 * a tiny app replays the status and body through the validator, which answers 500 when they do not match.
 */
export async function expectResponseMatchesContract(
  method: "get" | "post",
  path: string,
  status: number,
  body: unknown,
): Promise<void> {
  if (!validatorApp) {
    validatorApp = express();
    validatorApp.use(express.json());
    validatorApp.use(
      OpenApiValidator.middleware({
        apiSpec: structuredClone(loadOpenApiDocument()) as never,
        validateRequests: false,
        validateResponses: true,
        validateSecurity: false,
        validateApiSpec: false,
      }),
    );
    validatorApp.use((_req, res) => {
      res.status(pending?.status ?? 500).json(pending?.body);
    });
    validatorApp.use(
      (
        err: { status?: number; message?: string },
        _req: express.Request,
        res: express.Response,
        _next: express.NextFunction,
      ) => {
        res.status(599).json({ contractViolation: err.message ?? String(err) });
      },
    );
  }
  pending = { status, body };
  const agent = request(validatorApp);
  const replayed = await (method === "post" ? agent.post(path).send({}) : agent.get(path));
  if (replayed.status !== status) {
    throw new Error(
      `${method.toUpperCase()} ${path} ${status} does not match the contract: ${JSON.stringify(replayed.body)}`,
    );
  }
}
