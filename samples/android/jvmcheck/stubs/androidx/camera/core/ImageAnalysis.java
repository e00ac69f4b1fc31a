package androidx.camera.core; public final class ImageAnalysis extends UseCase {
  public static final int STRATEGY_KEEP_ONLY_LATEST = 0; public static final int OUTPUT_IMAGE_FORMAT_RGBA_8888 = 2;
  public interface Analyzer { void analyze(ImageProxy image); }
  public void setAnalyzer(java.util.concurrent.Executor e, Analyzer a) {}
  public static final class Builder { public Builder() {} public Builder setBackpressureStrategy(int s) { return this; } public Builder setOutputImageFormat(int f) { return this; } public ImageAnalysis build() { return null; } } }
