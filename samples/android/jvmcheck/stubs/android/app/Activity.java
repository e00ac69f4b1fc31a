package android.app; public class Activity extends android.content.Context {
  public android.content.res.AssetManager getAssets() { return null; } public java.io.File getFilesDir() { return null; }
  protected void onCreate(android.os.Bundle b) {} protected void onDestroy() {}
  public void setContentView(android.view.View v) {} public void startActivity(android.content.Intent i) {}
  public final void runOnUiThread(Runnable r) {} }
