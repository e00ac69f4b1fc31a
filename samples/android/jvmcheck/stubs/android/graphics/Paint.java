package android.graphics; public class Paint {
  public enum Style { FILL, STROKE } public enum Cap { BUTT, ROUND }
  public int getColor() { return 0; } public void setColor(int c) {}
  public float getStrokeWidth() { return 0; } public void setStrokeWidth(float w) {}
  public Style getStyle() { return null; } public void setStyle(Style s) {}
  public Cap getStrokeCap() { return null; } public void setStrokeCap(Cap c) {}
  public final boolean isAntiAlias() { return false; } public void setAntiAlias(boolean a) {} }
