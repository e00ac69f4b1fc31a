package android.content; public abstract class Context { public abstract android.content.res.AssetManager getAssets(); public abstract java.io.File getFilesDir(); }
