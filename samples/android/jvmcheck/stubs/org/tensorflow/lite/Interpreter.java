package org.tensorflow.lite; public final class Interpreter implements AutoCloseable {
  public static class Options { public Options() {} public Options setNumThreads(int n) { return this; } }
  public Interpreter(java.nio.ByteBuffer b) {} public Interpreter(java.nio.ByteBuffer b, Options o) {}
  public void runSignature(java.util.Map<String, Object> inputs, java.util.Map<String, Object> outputs, String key) {}
  public void close() {} }
