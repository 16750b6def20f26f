import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import * as random from "@pulumi/random";
import { matching } from "../config-checks";

export interface AppSecretsArgs {
  prefix: string;
  stripeSecretKey: pulumi.Input<string>;
  stripeWebhookSecret: pulumi.Input<string>;
  keycloakAdminClientId: pulumi.Input<string>;
  keycloakAdminClientSecret: pulumi.Input<string>;
  smtpUrl: pulumi.Input<string>;
  /** Tailscale API access token or Headscale API key, as the stack's private network is. */
  privateNetworkApiKey: pulumi.Input<string>;
  tags: Record<string, string>;
}

/**
 * Secrets Manager entries for third-party credentials (Stripe, the identity provider's admin
 * client, SMTP, the streaming hosts). Values come from encrypted stack config; pods read them through the Secrets
 * Store CSI driver with their own IAM role.
 */
export class AppSecrets extends pulumi.ComponentResource {
  readonly stripeArn: pulumi.Output<string>;
  readonly identityProviderArn: pulumi.Output<string>;
  readonly smtpArn: pulumi.Output<string>;
  /** Sessions' secrets: PIN digest key and streaming-credentials key (both generated), private-network API key. */
  readonly streamingArn: pulumi.Output<string>;

  constructor(name: string, args: AppSecretsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:AppSecrets", name, {}, opts);
    matching(
      "secret name prefix",
      args.prefix,
      /^[A-Za-z0-9/_+=.@-]{1,400}$/,
      "a Secrets Manager name prefix",
    );
    if (typeof args.keycloakAdminClientId === "string") {
      matching("cgs:keycloakAdminClientId", args.keycloakAdminClientId, /^\S+$/, "a non-empty client id");
    }
    const entry = (key: string, description: string, value: Record<string, pulumi.Input<string>>) => {
      const secret = new aws.secretsmanager.Secret(
        `${name}-${key}`,
        { name: `${args.prefix}/${key}`, description, recoveryWindowInDays: 7, tags: args.tags },
        { parent: this },
      );
      new aws.secretsmanager.SecretVersion(
        `${name}-${key}`,
        { secretId: secret.id, secretString: pulumi.secret(pulumi.jsonStringify(value)) },
        { parent: this },
      );
      return secret.arn;
    };
    this.stripeArn = entry("stripe", "Stripe API key and webhook signing secret", {
      secretKey: args.stripeSecretKey,
      webhookSecret: args.stripeWebhookSecret,
    });
    this.identityProviderArn = entry("identity-provider", "Identity provider admin client credentials", {
      adminClientId: args.keycloakAdminClientId,
      adminClientSecret: args.keycloakAdminClientSecret,
    });
    this.smtpArn = entry("smtp", "SMTP URL with credentials for account e-mails", { url: args.smtpUrl });
    const pinHashSecret = new random.RandomPassword(
      `${name}-pin-hash`,
      { length: 48, special: false },
      { parent: this },
    );
    // Seals each instance's own Sunshine API credentials in the sessions database; there is no shared password.
    const streamingCredentialsKey = new random.RandomBytes(
      `${name}-streaming-credentials`,
      { length: 32 },
      { parent: this },
    );
    this.streamingArn = entry(
      "streaming",
      "Pairing-PIN digest key, streaming-credentials sealing key, private-network (Tailscale or Headscale) API key",
      {
        pinHashSecret: pinHashSecret.result,
        streamingCredentialsKey: streamingCredentialsKey.base64,
        privateNetworkApiKey: args.privateNetworkApiKey,
      },
    );
    this.registerOutputs({ stripeArn: this.stripeArn, identityProviderArn: this.identityProviderArn });
  }
}
