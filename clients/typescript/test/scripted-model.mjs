// A model for the OpenAI Agents SDK that answers from a script (no network):
// each turn returns the next output items; the requests are kept, so a test
// reads what the tools answered as the model saw it.
import assert from "node:assert/strict";

import { Usage } from "@openai/agents";

export class ScriptedModel {
  constructor(turns) {
    this.turns = turns;
    this.requests = [];
  }
  async getResponse(request) {
    this.requests.push(request);
    const output = this.turns.shift();
    assert.ok(output, "the agent asked the model more often than the script says");
    return { usage: new Usage(), output, responseId: `r${this.requests.length}` };
  }
  async *getStreamedResponse() {
    throw new Error("not streamed");
  }
  /** What the model was shown last (the tools' answers included), as JSON text. */
  lastInput() {
    return JSON.stringify(this.requests.at(-1).input);
  }
}

export function call(id, name, args) {
  return { type: "function_call", callId: id, name, arguments: JSON.stringify(args), status: "completed" };
}

export function message(text) {
  return { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] };
}
