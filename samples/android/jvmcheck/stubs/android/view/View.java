package android.view; public class View {
  public View(android.content.Context c) {}
  public interface OnClickListener { void onClick(View v); }
  public static class MeasureSpec { public static int getSize(int spec) { return 0; } }
  public boolean onTouchEvent(MotionEvent e) { return false; }
  public boolean performClick() { return false; }
  protected void onMeasure(int w, int h) {}
  protected final void setMeasuredDimension(int w, int h) {}
  protected void onDraw(android.graphics.Canvas c) {}
  public final int getWidth() { return 0; } public final int getHeight() { return 0; }
  public void invalidate() {} public void setOnClickListener(OnClickListener l) {}
  public void setPadding(int l, int t, int r, int b) {}
  public final android.content.Context getContext() { return null; } }
