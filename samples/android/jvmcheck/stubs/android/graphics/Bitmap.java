package android.graphics; public final class Bitmap {
  public enum Config { ARGB_8888 }
  public int getWidth() { return 0; } public int getHeight() { return 0; }
  public void getPixels(int[] pixels, int offset, int stride, int x, int y, int width, int height) {}
  public static Bitmap createScaledBitmap(Bitmap src, int w, int h, boolean filter) { return null; }
  public static Bitmap createBitmap(Bitmap src, int x, int y, int w, int h, Matrix m, boolean filter) { return null; }
  public static Bitmap createBitmap(Bitmap src, int x, int y, int w, int h) { return null; }
  public static Bitmap createBitmap(int w, int h, Config c) { return null; } }
